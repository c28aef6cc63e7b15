"""Judger services: references between judgers, resolving for a run, dry runs, and who may use what."""

import pytest
from django.core.exceptions import ValidationError

from rlweb.datasets.services import generate_arith_dataset, import_dataset
from rlweb.judgers import services
from rlweb.judgers.models import JudgerConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def numeric(alice):
    return services.save_judger(alice, "numeric", "numeric", {"extract": "auto"})


def router_params(*names, default=None):
    params = {"mode": "by_data_source", "routes": {f"src{i}": {"ref": name} for i, name in enumerate(names)}}
    if default:
        params["default"] = {"ref": default}
    return params


def test_saving_stores_the_specs_normalized_params(alice):
    judger = services.save_judger(alice, "n", "numeric", {"tolerance": 0.5}, ray_actors=2)
    assert judger.params == {"extract": "auto", "tolerance": 0.5}
    assert judger.ray_actors == 2


def test_saving_refuses_what_the_spec_refuses_with_field_errors(alice):
    with pytest.raises(ValidationError) as caught:
        services.save_judger(alice, "bad", "regex", {"pattern": "(", "nonsense": 1})
    assert set(caught.value.message_dict) == {"pattern", "nonsense"}
    with pytest.raises(ValidationError) as caught:
        services.save_judger(alice, "bad", "magic", {})
    assert "kind" in caught.value.message_dict


def test_resolve_spec_inlines_references_and_a_run_config_accepts_it(alice, numeric):
    services.save_judger(alice, "exact", "exact", {}, ray_actors=1)
    inner = services.save_judger(alice, "inner", "router", router_params("exact", default="numeric"))
    outer = services.save_judger(alice, "outer", "router", {"mode": "weighted_sum", "components": [
        {"name": "a", "weight": 2.0, "judger": {"ref": "inner"}},
        {"name": "b", "weight": 1.0, "judger": {"kind": "format"}},
    ]})
    spec = services.resolve_spec(outer)
    assert spec["components"][0]["judger"]["routes"]["src0"] == {"kind": "exact", "ray_actors": 1, "case_sensitive": True, "strip": True}
    assert spec["components"][0]["judger"]["default"]["kind"] == "numeric"
    from workers.rl.config import RunConfig

    config = RunConfig(judger=spec)
    assert config.judger.components[0].judger.routes["src0"].ray_actors == 1
    assert inner.params["routes"] == {"src0": {"ref": "exact"}}  # stored with its references


def test_references_must_name_the_owners_own_judgers(alice, bob, numeric):
    with pytest.raises(ValidationError, match="refers to judger 'numeric', which you do not have"):
        services.save_judger(bob, "steal", "router", router_params("numeric"))
    assert not JudgerConfig.objects.filter(owner=bob).exists()


def test_cycles_and_self_references_are_refused(alice, numeric):
    services.save_judger(alice, "r1", "router", router_params("numeric"))
    r2 = services.save_judger(alice, "r2", "router", router_params("r1"))
    with pytest.raises(ValidationError, match="cannot refer to itself"):
        services.save_judger(alice, "r3", "router", router_params("r3"))
    r1 = JudgerConfig.objects.get(name="r1")
    with pytest.raises(ValidationError, match="refers back to itself"):
        services.save_judger(alice, "r1", "router", router_params("r2"), instance=r1)
    assert r2.params == router_params("r1")


def test_renaming_a_judger_updates_the_routers_that_use_it(alice, numeric):
    router = services.save_judger(alice, "router", "router", router_params("numeric"))
    services.save_judger(alice, "numbers", "numeric", numeric.params, instance=numeric)
    router.refresh_from_db()
    assert router.params["routes"] == {"src0": {"ref": "numbers"}}
    assert services.resolve_spec(router)["routes"]["src0"]["kind"] == "numeric"


def test_a_judger_used_by_a_router_cannot_be_deleted_or_broken(alice, numeric):
    services.save_judger(alice, "router", "router", {"mode": "weighted_sum", "components": [{"name": "x", "judger": {"ref": "numeric"}}]})
    with pytest.raises(ValidationError, match="used by router 'router'"):
        services.delete_judger(numeric)
    # Changing its kind to one a router cannot use is not possible; any valid change is fine.
    services.save_judger(alice, "numeric", "exact", {}, instance=numeric)
    assert JudgerConfig.objects.filter(name="numeric").exists()


def test_try_judger_never_raises_and_explains(alice, numeric):
    outcome = services.try_judger(numeric, "The total is 12.", "12")
    assert outcome.score == 1.0 and "12" in outcome.explanation
    outcome = services.try_judger(numeric, "no number", "12")
    assert outcome.score == 0.0
    assert services.try_judger(numeric, "12", "").status == "failed"  # no label


def test_a_dry_run_of_a_correct_reward_passes_every_reference_answer(alice, numeric):
    dataset = generate_arith_dataset(alice, "arith", n_train=150, n_eval=50, seed=0)
    report = services.dry_run(numeric, dataset)
    assert (report.total, report.passed, report.pass_rate, report.errors) == (200, 200, 1.0, 0)
    assert report.failing_rows == []
    assert services.dry_run(numeric, dataset, 20, split="eval").total == 20


def test_a_dry_run_catches_a_parsing_mistake_and_lists_the_failing_rows(alice):
    dataset = generate_arith_dataset(alice, "arith", n_train=30, n_eval=0, seed=0)
    # The classic flat reward: the judger wants '####' but responses will be \boxed{}.
    judger = services.save_judger(alice, "gsm8k-only", "numeric", {"extract": "gsm8k"})
    report = services.dry_run(judger, dataset, response_template="The answer is \\boxed{{answer}}.")
    assert report.passed == 0 and report.failing_count == 30
    failing = report.failing_rows[0]
    assert failing["response"].startswith("The answer is \\boxed{") and failing["score"] == 0.0
    assert failing["explanation"] or failing["error"]
    fixed = services.save_judger(alice, "boxed", "numeric", {"extract": "boxed"})
    assert services.dry_run(fixed, dataset, response_template="The answer is \\boxed{{answer}}.").pass_rate == 1.0


def test_dry_run_thresholds_follow_each_kinds_best_score(alice, tmp_path):
    from tests.datasets.conftest import write_jsonl

    dataset = import_dataset(alice, "d", write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p", "answer": "short", "data_source": "a"}]))
    penalty = services.save_judger(alice, "len", "length_penalty", {"max_len": 100})
    assert services.dry_run(penalty, dataset).pass_rate == 1.0  # best is 0: no penalty
    weighted = services.save_judger(alice, "w", "router", {"mode": "weighted_sum", "components": [
        {"name": "exact", "weight": 2.0, "judger": {"kind": "exact"}},
        {"name": "len", "weight": 1.0, "judger": {"ref": "len"}},
    ]})
    report = services.dry_run(weighted, dataset)
    assert report.pass_rate == 1.0 and report.mean_score == 2.0
    assert services.dry_run(weighted, dataset, threshold=2.5).passed == 0


def test_a_dry_run_through_an_http_judger_uses_one_client_for_every_row(alice, reward_service):
    dataset = generate_arith_dataset(alice, "arith", n_train=40, n_eval=0, seed=0)
    judger = services.save_judger(alice, "remote", "http", {"url": reward_service.url, "timeout_s": 5, "retries": 0, "max_concurrency": 8})
    report = services.dry_run(judger, dataset)
    assert (report.total, report.passed) == (40, 40)
    assert len(reward_service.requests) == 40
    reward_service.mode = "garbage"
    report = services.dry_run(judger, dataset, 5)
    assert report.errors == 5 and "not JSON" in report.failing_rows[0]["error"]
