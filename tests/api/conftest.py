"""API test fixtures: token-authenticated clients for the house users and a run with data."""

import time

import pytest
from rest_framework.test import APIClient

from rlweb.api.tokens import issue_token
from rlweb.runs.models import Checkpoint, MetricPoint, Run, RunLog, Trajectory


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(user).key}")
    return client


@pytest.fixture
def api(alice):
    """Alice's API client (token auth)."""
    return token_client(alice)


@pytest.fixture
def bob_api(bob):
    return token_client(bob)


@pytest.fixture
def staff_api(staff):
    return token_client(staff)


@pytest.fixture
def anon():
    return APIClient()


def make_run_with_data(owner, *, steps=5, samples_per_step=4, name="alices run") -> Run:
    """A finished run as a worker would have left it: metric points, samples, logs, a checkpoint."""
    from workers.rl.config import RunConfig

    config = RunConfig(name=name).model_dump(mode="json")
    run = Run.objects.create(owner=owner, name=name, config=config, status=Run.Status.COMPLETED,
                             total_steps=steps, current_step=steps)
    now = time.time()
    MetricPoint.objects.bulk_create(
        MetricPoint(run=run, step=s, name=n, value=float(s) * k, wall_time=now + s)
        for s in range(1, steps + 1)
        for k, n in ((1.0, "reward/mean"), (0.5, "loss/policy"))
    )
    Trajectory.objects.bulk_create(
        Trajectory(
            run=run, step=s, uid=f"s{s}-{i}", group_id=f"g{s}-{i // 2}", status="completed",
            finish_reason="stop" if i % 2 else "length", reward=float(i % 2), data_source="arith",
            prompt=f"what is {s}+{i}?", response=f"{s + i}", label=f"{s + i}", response_len=1 + i,
            tokens=[["1", -0.1, 1]],
        )
        for s in range(1, steps + 1)
        for i in range(samples_per_step)
    )
    RunLog.objects.bulk_create(RunLog(run=run, message=f"step {s} done") for s in range(1, steps + 1))
    return run


@pytest.fixture
def alices_run(alice):
    return make_run_with_data(alice)


@pytest.fixture
def checkpoint_dir(settings, tmp_path):
    """A checkpoint folder under DATA_DIR, as the trainer writes one."""
    from pathlib import Path

    root = Path(settings.DATA_DIR) / "test-checkpoints" / str(time.time_ns())
    (root / "model").mkdir(parents=True)
    (root / "model" / "weights.bin").write_bytes(bytes(range(256)) * 40)
    (root / "state.json").write_text('{"step": 5}')
    yield root
    import shutil

    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def alices_checkpoint(alices_run, checkpoint_dir):
    return Checkpoint.objects.create(run=alices_run, step=5, path=str(checkpoint_dir), size_bytes=10270)
