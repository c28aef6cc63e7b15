"""Checkpoint directories: `<out>/checkpoints/step-00000010/` holding `model/` (Hugging Face
format, loadable as any model) and `trainer_state.pt` (optimizer, scheduler, RNG states, data
cursor, replay buffer, step, policy version).

A checkpoint is written into a temporary sibling directory and renamed into place only once
complete, with a marker file written last: a crash mid-write leaves no directory that looks
finished, and resume always finds the newest complete one. Keep-N pruning deletes the oldest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MARKER = "checkpoint.json"
_NAME = re.compile(r"^step-(\d{8})$")


@dataclass(frozen=True)
class CheckpointInfo:
    step: int
    path: Path


def checkpoint_path(root: Path, step: int) -> Path:
    return root / f"step-{step:08d}"


def list_checkpoints(root: Path) -> list[CheckpointInfo]:
    """Complete checkpoints under root, oldest first."""
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _NAME.match(child.name)
        if match and (child / MARKER).is_file():
            found.append(CheckpointInfo(int(match.group(1)), child))
    return sorted(found, key=lambda c: c.step)


def latest_checkpoint(root: Path) -> CheckpointInfo | None:
    found = list_checkpoints(root)
    return found[-1] if found else None


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def write_checkpoint(root: Path, step: int, write: Callable[[Path], None], meta: dict | None = None) -> tuple[Path, int]:
    """Call `write(tmp_dir)` to fill a new checkpoint, then publish it atomically."""
    root.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(root, step)
    tmp = root / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
        (tmp / MARKER).write_text(json.dumps({"step": step, **(meta or {})}, indent=2))
        if final.exists():  # re-running a step after a resume from an older checkpoint
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final, dir_size(final)


def prune_checkpoints(root: Path, keep: int) -> list[CheckpointInfo]:
    """Delete all but the `keep` newest complete checkpoints; returns the deleted ones."""
    found = list_checkpoints(root)
    doomed = found[: max(0, len(found) - keep)]
    for info in doomed:
        shutil.rmtree(info.path, ignore_errors=True)
    return doomed
