"""Judgers running as a pool of Ray CPU actors (spec.ray_actors > 0)."""

import asyncio
import time

import pytest

from workers.rl.judgers.build import build_judger, build_judger_from_dict
from workers.rl.judgers.spec import MathVerifySpec, NumericMatchSpec
from workers.rl.sample import Sample, SampleStatus

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    if started_here:
        ray.shutdown()


def eventually_dead(actor, within_s=30.0):
    """ray.kill is asynchronous: a call sent right after it may still be answered."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ready.remote(), timeout=within_s)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.2)
    return False


def make_sample(response, label, uid, data_source=""):
    return Sample(uid=uid, group_id="g", prompt="p", prompt_ids=[1] * 5, label=label, data_source=data_source, response=response, logprobs=[-0.1] * 3)


def test_a_pool_judges_like_the_judger_it_runs_and_spreads_the_work(local_ray):
    from workers.rl.judgers.pool import RayJudgerPool

    pool = build_judger(NumericMatchSpec(ray_actors=2))
    try:
        assert isinstance(pool, RayJudgerPool)
        samples = [make_sample(f"#### {i % 3}", "1", uid=str(i)) for i in range(12)]
        judged = asyncio.run(pool.judge_many(samples))
        assert [s.score for s in judged] == [1.0 if i % 3 == 1 else 0.0 for i in range(12)]
        assert judged[1].explanation == "response answer: 1 (from '####'); label: 1 (from whole text) → match"
        assert judged[1] is samples[1] and judged[1].logprobs == [-0.1] * 3  # results land on the caller's samples
        assert sum(pool.dispatched) == 12 and min(pool.dispatched) >= 4  # both actors did a share
        # A failure inside an actor fails the sample with the judger's own message.
        failed = asyncio.run(pool.judge(make_sample("#### 1", None, uid="x")))
        assert failed.status == SampleStatus.FAILED
        assert failed.error == "numeric judger needs a label, and this sample has none"
    finally:
        actors = list(pool.actors)
        pool.close()
    assert all(eventually_dead(actor) for actor in actors)
    closed = asyncio.run(pool.judge(make_sample("#### 1", "1", uid="y")))
    assert closed.error == "numeric judger: the actor pool is closed"


def test_router_and_math_verify_in_actors(local_ray):
    # math-verify inside an actor runs off the main thread: it must use its worker process.
    spec = {
        "mode": "by_data_source",
        "ray_actors": 1,
        "routes": {"math": MathVerifySpec().model_dump(), "gsm8k": NumericMatchSpec().model_dump()},
    }
    pool = build_judger_from_dict("router", spec)
    try:
        judged = asyncio.run(
            pool.judge_many(
                [
                    make_sample("\\boxed{\\frac{1}{2}}", "0.5", "a", "math"),
                    make_sample("#### 72", "72", "b", "gsm8k"),
                    make_sample("#### 72", "72", "c", "mmlu"),
                ]
            )
        )
    finally:
        pool.close()
    assert [s.score for s in judged] == [1.0, 1.0, 0.0]
    assert judged[0].explanation.startswith("data_source 'math' → math_verify: response answer: '\\frac{1}{2}'")
    assert judged[2].status == SampleStatus.FAILED
    assert judged[2].error.startswith("no judger for data_source 'mmlu'")
