"""What every rollout engine takes and returns.

An engine turns token-id prompts into sampled continuations. It knows nothing about samples,
groups or rewards: the agent loop and the produce strategy build those on top.

Logprob convention (the trainer recomputes the same quantity, see workers/rl/train.py):
for temperature T > 0 the logprob of a sampled token is `log_softmax(logits.float() / T)[token]`,
i.e. under the tempered distribution *before* top-p truncation; for T == 0 (greedy) it is
`log_softmax(logits.float())[token]` (T taken as 1). Top-p only changes which tokens can be
drawn, never the reported logprob, so rollout and trainer logprobs agree whatever top_p is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 16


@dataclass
class GenerationRequest:
    input_ids: list[int]
    max_new_tokens: int
    # Seed of this row's own random stream: a row's tokens depend only on its seed and the
    # model, never on which other rows share its batch (exact resume relies on this).
    seed: int = 0
    stop_token_ids: tuple[int, ...] = ()  # besides the tokenizer's eos
    stop_strings: tuple[str, ...] = ()  # the decoded response ending with one of these stops the row
    tag: object = None  # opaque to the engine; handed back to `on_finish`


@dataclass
class GenerationOutput:
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "length"  # "stop" | "length" | "abort"
    stop: str | int | None = None  # the eos/stop token id or stop string that ended the row


# Called after every decode step with nothing; True aborts the unfinished rows of the call.
AbortPredicate = Callable[[], bool]
# Called as soon as a row finishes (before the call returns), with its request and output.
FinishCallback = Callable[[GenerationRequest, GenerationOutput], None]


class Engine(Protocol):
    def generate(
        self,
        requests: list[GenerationRequest],
        params: SamplingParams,
        should_abort: AbortPredicate | None = None,
        on_finish: FinishCallback | None = None,
    ) -> list[GenerationOutput]:
        """Continue every request; outputs in request order."""

    def sleep(self) -> None:
        """Free generation memory while the trainer runs (no-op where nothing to free)."""

    def wake_up(self) -> None:
        """Undo `sleep` before the next generation."""

    def sync_weights(self) -> None:
        """Make generation use the trainer's current weights (no-op when they share parameters)."""
