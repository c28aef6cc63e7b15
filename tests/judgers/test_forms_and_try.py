"""Every judger kind through the form (built from the engine's specs) and the "try it" endpoint."""

import pytest

from rlweb.judgers.models import JudgerConfig

pytestmark = pytest.mark.django_db


def create(client, kind, **fields):
    data = {"name": f"my-{kind}", "description": "", "ray_actors": "0", **fields}
    return client.post(f"/judgers/new/{kind}/", data)


def try_it(client, judger, response, label="", **extra):
    return client.post(f"/judgers/{judger.pk}/try/", {"response": response, "label": label, "prompt": "", "data_source": "", **extra}, headers={"HX-Request": "true"})


# kind, form fields, (response, label), expected score, words the explanation must hold
CASES = [
    ("numeric", {"extract": "auto", "tolerance": "0.001"}, ("so #### 42.0", "42"), 1.0, "42"),
    ("math_verify", {"timeout_s": "10"}, ("the answer is $\\frac{1}{2}$", "0.5"), 1.0, ""),
    ("exact", {"strip": "on"}, ("  Paris ", "paris"), 1.0, "ignoring case"),  # case_sensitive left unchecked
    ("regex", {"pattern": r"answer: (\d+)", "group": "1", "ignore_case": "on"}, ("ANSWER: 7", "7"), 1.0, ""),
    ("format", {"pattern": r"(?s).*\\boxed\{.+\}.*", "reward": "0.5"}, ("so \\boxed{3}", ""), 0.5, ""),
    ("length_penalty", {"max_len": "10", "buffer": "5"}, ("x" * 8, ""), -0.6, "8 characters"),
]


@pytest.mark.parametrize("kind, fields, sample, expected, words", CASES, ids=[c[0] for c in CASES])
def test_each_rule_kind_is_created_through_its_form_and_tried(alice_client, kind, fields, sample, expected, words):
    response = create(alice_client, kind, **fields)
    assert response.status_code == 302, response.content.decode()[:3000]
    judger = JudgerConfig.objects.get(name=f"my-{kind}")
    assert judger.kind == kind
    page = alice_client.get(f"/judgers/{judger.pk}/").content.decode()
    assert 'id="try"' in page and 'id="dry-run"' in page
    result = try_it(alice_client, judger, *sample)
    html = result.content.decode()
    assert result.status_code == 200, html
    assert f'data-score>{expected}<' in html, html
    assert words in html


def test_exact_match_case_sensitivity_comes_from_the_checkbox(alice_client):
    create(alice_client, "exact", strip="on", case_sensitive="on")
    judger = JudgerConfig.objects.get(name="my-exact")
    assert judger.params == {"case_sensitive": True, "strip": True}
    assert "data-score>0.0<" in try_it(alice_client, judger, "Paris", "paris").content.decode()
    alice_client.post(f"/judgers/{judger.pk}/edit/", {"name": "my-exact", "strip": "on", "ray_actors": "0"})
    judger.refresh_from_db()
    assert judger.params["case_sensitive"] is False
    assert "data-score>1.0<" in try_it(alice_client, judger, "Paris", "paris").content.decode()


@pytest.mark.parametrize(
    "kind, fields, field, message",
    [
        ("regex", {"pattern": "(unclosed"}, "pattern", "invalid regular expression"),
        ("numeric", {"extract": "auto", "tolerance": "-1"}, "tolerance", "greater than or equal to 0"),
        ("length_penalty", {"buffer": "2"}, "max_len", "Field required"),
        ("http", {"url": "not a url", "timeout_s": "1", "retries": "0", "max_concurrency": "4"}, "url", "URL"),
        ("format", {"pattern": "x", "reward": "1", "ray_actors": "100"}, "ray_actors", "less than or equal to 64"),
        ("math_verify", {"timeout_s": "0"}, "timeout_s", "greater than 0"),
    ],
)
def test_the_specs_errors_are_shown_inline_on_their_field(alice_client, kind, fields, field, message):
    response = create(alice_client, kind, **fields)
    assert response.status_code == 400
    html = response.content.decode()
    block = html.split(f'class="field field-{field}"', 1)[1].split('class="field ', 1)[0]
    assert 'class="errorlist"' in block and message in block, block
    assert not JudgerConfig.objects.exists()


def test_an_unknown_kind_is_not_found(alice_client):
    assert alice_client.get("/judgers/new/nonsense/").status_code == 404


def test_the_kind_chooser_lists_every_kind_of_the_engine(alice_client):
    from workers.rl.judgers.spec import SPEC_BY_KIND

    html = alice_client.get("/judgers/new/").content.decode()
    for kind in SPEC_BY_KIND:
        assert f'href="/judgers/new/{kind}/"' in html


def test_a_router_routes_by_data_source_to_named_judgers(alice_client):
    create(alice_client, "numeric", extract="auto", tolerance="0.000001")
    create(alice_client, "exact", strip="on", case_sensitive="on")
    response = alice_client.post(
        "/judgers/new/router/",
        {"name": "by-source", "ray_actors": "0", "mode": "by_data_source", "route_0_source": "math", "route_0_judger": "my-numeric",
         "route_1_source": "geo", "route_1_judger": "my-exact", "default": "my-exact"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    router = JudgerConfig.objects.get(name="by-source")
    assert router.params["routes"] == {"math": {"ref": "my-numeric"}, "geo": {"ref": "my-exact"}}
    html = try_it(alice_client, router, "it is 12", "12", data_source="math").content.decode()
    assert "data-score>1.0<" in html and "data_source &#x27;math&#x27;" in html
    html = try_it(alice_client, router, "it is 12", "12", data_source="geo").content.decode()
    assert "data-score>0.0<" in html


def test_a_weighted_sum_router_adds_its_components(alice_client):
    create(alice_client, "numeric", extract="auto", tolerance="0.000001")
    create(alice_client, "format", pattern=r"(?s).*\\boxed\{.+\}.*", reward="1")
    response = alice_client.post(
        "/judgers/new/router/",
        {"name": "sum", "ray_actors": "0", "mode": "weighted_sum",
         "component_0_name": "acc", "component_0_weight": "1", "component_0_judger": "my-numeric",
         "component_1_name": "fmt", "component_1_weight": "0.5", "component_1_judger": "my-format"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    html = try_it(alice_client, JudgerConfig.objects.get(name="sum"), "\\boxed{5}", "5").content.decode()
    assert "data-score>1.5<" in html and "acc = 1.0" in html and "fmt = 1.0" in html


def test_a_router_without_routes_shows_the_specs_error(alice_client):
    response = alice_client.post("/judgers/new/router/", {"name": "empty", "ray_actors": "0", "mode": "by_data_source"})
    assert response.status_code == 400
    assert "needs at least one route or a default" in response.content.decode()


def test_an_http_judger_scores_through_a_local_service(alice_client, reward_service):
    response = create(alice_client, "http", url=reward_service.url, timeout_s="5", retries="0", max_concurrency="4",
                      headers="Authorization: Bearer s3cret-token\nX-Team: rl")
    assert response.status_code == 302, response.content.decode()[:3000]
    judger = JudgerConfig.objects.get(name="my-http")
    html = try_it(alice_client, judger, "42", "42", prompt="6*7?").content.decode()
    assert "data-score>1.0<" in html and "fluency = 0.5" in html and "compared by the service" in html
    assert reward_service.requests[-1]["prompt"] == "6*7?"
    assert reward_service.headers[-1]["Authorization"] == "Bearer s3cret-token"


def test_a_slow_reward_service_times_out_and_the_sample_fails_with_the_reason(alice_client, reward_service):
    create(alice_client, "http", url=reward_service.url, timeout_s="0.3", retries="0", max_concurrency="4")
    reward_service.mode = "slow"
    html = try_it(alice_client, JudgerConfig.objects.get(name="my-http"), "42", "42").content.decode()
    assert "data-outcome-status>failed<" in html and "timed out after 0.3 s" in html and "data-score>0.0<" in html


@pytest.mark.parametrize("mode, words", [("garbage", "not JSON"), ("no_score", "has no &#x27;score&#x27;"), ("error500", "server answered 500")])
def test_a_reward_service_answering_garbage_fails_the_sample_with_the_reason(alice_client, reward_service, mode, words):
    create(alice_client, "http", url=reward_service.url, timeout_s="2", retries="0", max_concurrency="4")
    reward_service.mode = mode
    html = try_it(alice_client, JudgerConfig.objects.get(name="my-http"), "42", "42").content.decode()
    assert "data-outcome-status>failed<" in html and words in html


def test_http_headers_are_never_shown_back_and_are_kept_on_edit(alice_client, reward_service):
    create(alice_client, "http", url=reward_service.url, timeout_s="5", retries="0", max_concurrency="4", headers="Authorization: Bearer s3cret-token")
    judger = JudgerConfig.objects.get(name="my-http")
    for url in (f"/judgers/{judger.pk}/", f"/judgers/{judger.pk}/edit/"):
        html = alice_client.get(url).content.decode()
        assert "s3cret-token" not in html and "Authorization: •••" in html, url
    assert "Authorization: ••• set" in alice_client.get(f"/judgers/{judger.pk}/").content.decode()
    # Saving the edit form as shown keeps the secret; a new value replaces it.
    edit = {"name": "my-http", "url": reward_service.url, "timeout_s": "5", "retries": "1", "max_concurrency": "4", "ray_actors": "0", "headers": "Authorization: •••"}
    assert alice_client.post(f"/judgers/{judger.pk}/edit/", edit).status_code == 302
    judger.refresh_from_db()
    assert judger.params["headers"] == {"Authorization": "Bearer s3cret-token"} and judger.params["retries"] == 1
    try_it(alice_client, judger, "1", "1")
    assert reward_service.headers[-1]["Authorization"] == "Bearer s3cret-token"
    alice_client.post(f"/judgers/{judger.pk}/edit/", {**edit, "headers": "Authorization: Bearer new"})
    judger.refresh_from_db()
    assert judger.params["headers"] == {"Authorization": "Bearer new"}
    bad = alice_client.post(f"/judgers/{judger.pk}/edit/", {**edit, "headers": "X-Other: •••"})
    assert bad.status_code == 400 and "no stored value to keep" in bad.content.decode()


def test_try_it_can_take_the_label_from_a_dataset_row(alice_client, alice):
    from rlweb.datasets.services import generate_arith_dataset

    dataset = generate_arith_dataset(alice, "arith", n_train=5, n_eval=0, seed=0)
    create(alice_client, "numeric", extract="auto", tolerance="0.000001")
    from rlweb.datasets.models import DatasetRow

    row = DatasetRow.objects.get(dataset=dataset, index=3)
    html = try_it(alice_client, JudgerConfig.objects.get(name="my-numeric"), row.answer, "", dataset=str(dataset.pk), row="3").content.decode()
    assert "data-score>1.0<" in html and f"Row 3 of the dataset: label {row.answer}" in html
    missing = try_it(alice_client, JudgerConfig.objects.get(name="my-numeric"), "1", "", dataset=str(dataset.pk), row="99")
    assert missing.status_code == 400 and "has no row 99" in missing.content.decode()
