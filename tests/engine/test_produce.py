"""Produce strategies on the real tiny model: sync batches, the dynamic-sampling filter, async
staleness bounds (issue 3, acceptance 5) and partial rollout."""

import pytest
import torch

from tests.engine.helpers import small_config
from workers.rl.produce import zero_variance
from workers.rl.recording_reporter import RecordingReporter
from workers.rl.sample import SampleStatus
from workers.rl.trainer import ColocatedWorker, train

torch.set_num_threads(1)


def worker_for(cfg, tmp_path) -> ColocatedWorker:
    return ColocatedWorker(cfg.model_dump(mode="json"), str(tmp_path))


def produce(worker, step, version):
    return worker.loop.run_until_complete(worker.producer.produce(step, version))


def test_sync_produce_returns_b_judged_groups_of_n_from_the_current_policy(tmp_path):
    cfg = small_config(rollout={"prompts_per_step": 3, "n": 5})
    worker = worker_for(cfg, tmp_path)
    batch = produce(worker, step=4, version=3)
    assert len(batch.groups) == 3 and all(len(g) == 5 for g in batch.groups)
    assert len({g[0].group_id for g in batch.groups}) == 3
    for sample in batch.samples:
        assert sample.status == SampleStatus.COMPLETED
        assert "score" in sample.reward and sample.explanation
        assert sample.policy_version == 3
        assert 1 <= len(sample.response_ids) <= 4
        assert len(sample.logprobs) == len(sample.response_mask) == len(sample.response_ids)
        assert sample.finish_reason in ("stop", "length")
    # All samples of a group answer the same prompt.
    for group in batch.groups:
        assert len({s.prompt for s in group}) == 1


def test_the_dynamic_sampling_filter_keeps_only_groups_with_reward_variance(tmp_path):
    cfg = small_config(rollout={"prompts_per_step": 4, "n": 4}, algorithm={"filter_zero_variance": True}, produce={"max_refill_rounds": 20})
    worker = worker_for(cfg, tmp_path)
    batch = produce(worker, step=1, version=0)
    assert batch.stats["produce/filtered_groups"] > 0, "the tiny model gets all-equal groups often: the filter must have had work"
    assert len(batch.groups) == 4
    assert not any(zero_variance(g) for g in batch.groups)
    assert all(s.status == SampleStatus.FILTERED for s in batch.finished)


def test_async_with_max_staleness_1_never_trains_a_sample_staler_than_1(tmp_path):
    # Oversampling 3x leaves two batches waiting after the first step: the second of them would
    # be 2 versions old when its turn comes, so it must be expired instead of trained.
    cfg = small_config(
        produce={"strategy": "async", "oversample": 3.0, "max_staleness": 1},
        schedule={"total_steps": 6, "eval_every": 0, "checkpoint_every": 0, "log_samples": 1000},
    )
    reporter = RecordingReporter()
    train(cfg, tmp_path, reporter)
    steps = reporter.steps.values()
    assert max(m["staleness/max"] for m in steps) == 1, "some trained samples should be exactly 1 version old"
    assert sum(m["produce/expired_groups"] for m in steps) > 0
    trained = [s for s in reporter.samples if s["split"] == "train" and s["status"] == "completed"]
    assert trained and max(s["staleness"] for s in trained) <= 1
    expired = [s for s in reporter.samples if s["status"] == "expired"]
    assert expired, "expired groups are reported as such"


def test_partial_rollout_continues_an_aborted_response_with_the_new_policy(tmp_path):
    # Two groups per step and 4x oversampling: generation stops once two groups are complete,
    # so groups still writing a 3-digit answer are aborted after 3 tokens.
    cfg = small_config(seed=0, rollout={"prompts_per_step": 2, "n": 4}, produce={"strategy": "async", "oversample": 4.0, "max_staleness": 1, "partial_rollout": True})
    worker = worker_for(cfg, tmp_path)
    produce(worker, step=1, version=0)
    aborted = {s.uid: s for g in worker.producer.buffer.aborted for s in g if s.status == SampleStatus.ABORTED and s.response_ids}
    assert aborted, "the setup must abort some responses mid-way"
    before = {uid: (list(s.response_ids), list(s.logprobs)) for uid, s in aborted.items()}

    # Drain the ready groups so that the next steps must finish the aborted ones.
    seen = {}
    for step, version in ((2, 1), (3, 1)):
        batch = produce(worker, step=step, version=version)
        seen.update({s.uid: s for s in batch.samples if s.uid in aborted})
    assert seen, "the aborted groups are trained on once resumed"
    for uid, sample in seen.items():
        ids, logprobs = before[uid]
        assert sample.response_ids[: len(ids)] == ids
        assert sample.logprobs[: len(ids)] == logprobs
        assert sample.finish_reason in ("stop", "length")
        assert sample.policy_version == 0, "the version of its first token, so staleness stays honest"
    assert any(len(s.response_ids) > len(before[uid][0]) for uid, s in seen.items()), "some continued with new tokens"


def test_without_partial_rollout_an_aborted_response_is_restarted(tmp_path):
    cfg = small_config(seed=0, rollout={"prompts_per_step": 2, "n": 4}, produce={"strategy": "async", "oversample": 4.0, "max_staleness": 1, "partial_rollout": False})
    worker = worker_for(cfg, tmp_path)
    produce(worker, step=1, version=0)
    aborted = {s.uid for g in worker.producer.buffer.aborted for s in g if s.status == SampleStatus.ABORTED}
    assert aborted
    seen = {}
    for step in (2, 3):
        batch = produce(worker, step=step, version=1)
        seen.update({s.uid: s for s in batch.samples if s.uid in aborted})
    assert seen and all(s.policy_version == 1 for s in seen.values())


@pytest.mark.parametrize("strategy", ["sync", "async"])
def test_every_trained_group_is_a_whole_group(tmp_path, strategy):
    cfg = small_config(produce={"strategy": strategy, "oversample": 2.0})
    worker = worker_for(cfg, tmp_path)
    for step in (1, 2, 3):
        batch = produce(worker, step=step, version=step - 1)
        assert len(batch.groups) == cfg.rollout.prompts_per_step
        assert all(len(g) == cfg.rollout.n and len({s.group_id for s in g}) == 1 for g in batch.groups)
