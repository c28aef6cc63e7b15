"""Command line for the engine.

    python -m workers.rl train CONFIG.yaml [--set key=value ...] [--out DIR] [--no-resume]
    python -m workers.rl validate CONFIG.yaml [--set key=value ...]
    python -m workers.rl tiny build [--seed N] [--force]

`train` writes DIR/metrics.jsonl, DIR/samples.jsonl, DIR/events.jsonl, DIR/config.yaml,
DIR/tensorboard/ and DIR/checkpoints/, and shows a progress bar. Running it again on the same
DIR continues from the newest checkpoint (unless --no-resume). Ctrl-C stops cleanly after the
current step (a second Ctrl-C aborts at once); so does creating the file DIR/STOP.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections import deque
from pathlib import Path

from workers.rl.config import ConfigError, load_config


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workers.rl", description="rlweb's RL engine")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train from a YAML run config")
    train.add_argument("config", type=Path)
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config field, e.g. --set optimizer.lr=2e-4 (repeatable)")
    train.add_argument("--out", type=Path, default=None, help="output directory (default: runs_out/<name>)")
    train.add_argument("--no-resume", action="store_true", help="start over even if DIR has checkpoints")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")

    validate = sub.add_parser("validate", help="check a YAML run config and print it in full")
    validate.add_argument("config", type=Path)
    validate.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")

    tiny = sub.add_parser("tiny", help="the builtin tiny-arith model")
    tiny_sub = tiny.add_subparsers(dest="tiny_command", required=True)
    build = tiny_sub.add_parser("build", help="build and warm up the tiny model now (cached)")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--force", action="store_true", help="rebuild even if it is cached")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "train":
            return _train(args)
        if args.command == "validate":
            config = load_config(args.config, args.overrides)
            print(config.to_yaml(), end="")
            return 0
        if args.command == "tiny":
            return _tiny_build(args)
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1


def _tiny_build(args) -> int:
    from workers.rl.tiny import ensure_tiny_model, tiny_info

    started = time.monotonic()
    path = ensure_tiny_model(seed=args.seed, force=args.force)
    info = tiny_info(args.seed) or {}
    print(
        f"{path}: {info.get('parameters', 0):,} parameters, held-out greedy accuracy "
        f"{100 * info.get('accuracy', 0):.0f}% after {info.get('steps', '?')} warm-up steps "
        f"({time.monotonic() - started:.1f} s)"
    )
    return 0


class _Progress:
    """tqdm bar over steps with the moving-average reward and the latest eval accuracy."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="step", dynamic_ncols=True)
        self.rewards: deque[float] = deque(maxlen=20)
        self.eval_accuracy: float | None = None

    def step(self, step: int, metrics: dict) -> None:
        if "reward/mean" in metrics:
            self.rewards.append(metrics["reward/mean"])
        if self.bar is not None:
            self.bar.n = step
            self._postfix()

    def evaluation(self, step: int, metrics: dict) -> None:
        self.eval_accuracy = metrics.get("eval/accuracy")
        if self.bar is not None:
            self._postfix()

    def _postfix(self) -> None:
        post = {}
        if self.rewards:
            post["reward"] = f"{sum(self.rewards) / len(self.rewards):.3f}"
        if self.eval_accuracy is not None:
            post["eval_acc"] = f"{self.eval_accuracy:.3f}"
        self.bar.set_postfix(post, refresh=True)

    def line(self, level: str, message: str) -> None:
        text = f"[{level}] {message}"
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _train(args) -> int:
    from workers.rl.jsonl_reporter import JsonlReporter
    from workers.rl.trainer import train

    config = load_config(args.config, args.overrides)
    out = args.out or Path("runs_out") / config.name
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(config.to_yaml())
    progress = _Progress(config.schedule.total_steps, enabled=not args.no_progress)
    reporter = JsonlReporter(out, on_step=progress.step, on_eval=progress.evaluation, on_line=progress.line)

    def on_interrupt(signum, frame):
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C aborts at once
        reporter.request_stop()
        print("\nstopping after the current step (Ctrl-C again to abort)", file=sys.stderr)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    started = time.monotonic()
    try:
        summary = train(config, out, reporter, resume=not args.no_resume)
    finally:
        signal.signal(signal.SIGINT, previous)
        progress.close()
    first = (summary.get("first_eval") or {}).get("eval/accuracy")
    last = (summary.get("last_eval") or {}).get("eval/accuracy")
    line = f"{summary['status']} at step {summary['step']} in {time.monotonic() - started:.0f} s; output in {out}"
    if first is not None and last is not None:
        line += f"; eval accuracy {100 * first:.1f}% -> {100 * last:.1f}%"
    print(line)
    return 0 if summary["status"] in ("completed", "cancelled") else 1
