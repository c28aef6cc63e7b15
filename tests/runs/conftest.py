"""Fixtures of the run tests: small valid configs and runs in a given state."""

import pytest

from workers.rl.config import RunConfig


def small_config(**sections) -> dict:
    """A valid config with a short schedule; `sections` override parts, e.g. schedule={...}."""
    data = RunConfig().model_dump(mode="json")
    data["name"] = "small"
    data["schedule"].update(total_steps=6, eval_every=0, checkpoint_every=2, keep_checkpoints=5)
    data["rollout"].update(prompts_per_step=2, n=2)
    for key, value in sections.items():
        if isinstance(value, dict):
            data[key].update(value)
        else:
            data[key] = value
    return data


@pytest.fixture
def config():
    return small_config()


@pytest.fixture
def make_run(alice):
    from rlweb.runs.models import Run

    def make(owner=None, status=Run.Status.QUEUED, **fields):
        cfg = fields.pop("config", small_config())
        return Run.objects.create(
            owner=owner or alice, name=fields.pop("name", "r"), config=cfg, status=status,
            total_steps=cfg["schedule"]["total_steps"], attempts=fields.pop("attempts", 1), **fields,
        )

    return make


@pytest.fixture
def presets_dir(tmp_path, monkeypatch):
    """Two presets in a directory of their own: the CPU demo and another."""
    import yaml

    from workers.rl import config as engine_config

    demo = small_config(name="tiny demo", rollout={"prompts_per_step": 16, "n": 8}, schedule={"total_steps": 60})
    other = small_config(name="other", optimizer={"lr": 3e-5})
    (tmp_path / "tiny-arith-grpo.yaml").write_text(yaml.safe_dump(demo))
    (tmp_path / "a-gpu-preset.yaml").write_text(yaml.safe_dump(other))
    monkeypatch.setattr(engine_config, "PRESETS_DIR", tmp_path)
    return tmp_path
