"""RolloutController: many agent loops call `await generate(request, params)` one request at a
time; the controller batches every request pending at that moment into one engine call.

Agent loops are coroutines. When they have all either finished or are waiting on `generate`,
the controller's flusher (which first yields to the event loop a few times, so every runnable
loop gets to submit) runs one batched engine call per distinct SamplingParams and resolves the
futures. With no real I/O in the agent loops the batches are the same on every run.

Async produce uses `abort_when(predicate)`: the engine checks it after every decode step (and
the controller before every call); once true, unfinished rows come back with finish_reason
"abort" and later requests are aborted at once. `on_finish` hears of every row as soon as it
finishes (stop or length; aborted rows are not reported), which is how a produce strategy counts completed groups mid-batch.
"""

from __future__ import annotations

import asyncio
import logging
import time

from workers.rl.rollout.base import (
    AbortPredicate,
    Engine,
    FinishCallback,
    GenerationOutput,
    GenerationRequest,
    SamplingParams,
)

log = logging.getLogger(__name__)


class RolloutController:
    def __init__(self, engines: Engine | list[Engine], gather_ticks: int = 4):
        self.engines: list[Engine] = engines if isinstance(engines, list) else [engines]
        if not self.engines:
            raise ValueError("a rollout controller needs at least one engine")
        self.gather_ticks = gather_ticks
        self._pending: list[tuple[GenerationRequest, SamplingParams, asyncio.Future]] = []
        self._flusher: asyncio.Task | None = None
        self._abort: AbortPredicate | None = None
        self._on_finish: FinishCallback | None = None
        self.generate_seconds = 0.0  # engine time, accumulated (the produce strategy reads and resets it)
        self.engine_calls = 0

    # --- hooks for produce strategies ----------------------------------------------------------

    def set_abort(self, predicate: AbortPredicate | None) -> None:
        self._abort = predicate

    def set_on_finish(self, callback: FinishCallback | None) -> None:
        self._on_finish = callback

    # --- engines -------------------------------------------------------------------------------

    def sleep(self) -> None:
        for engine in self.engines:
            engine.sleep()

    def wake_up(self) -> None:
        for engine in self.engines:
            engine.wake_up()

    def sync_weights(self) -> None:
        for engine in self.engines:
            engine.sync_weights()

    # --- generation ----------------------------------------------------------------------------

    async def generate(self, request: GenerationRequest, params: SamplingParams) -> GenerationOutput:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((request, params, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            for _ in range(self.gather_ticks):
                await asyncio.sleep(0)
            batch, self._pending = self._pending, []
            by_params: dict[SamplingParams, list[tuple[GenerationRequest, asyncio.Future]]] = {}
            for request, params, future in batch:
                by_params.setdefault(params, []).append((request, future))
            for params, items in by_params.items():
                try:
                    outputs = self._run([req for req, _ in items], params)
                except Exception as exc:  # the agent loops waiting on these rows see the error
                    for _, future in items:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), output in zip(items, outputs):
                    if not future.done():
                        future.set_result(output)

    def _run(self, requests: list[GenerationRequest], params: SamplingParams) -> list[GenerationOutput]:
        if self._abort is not None and self._abort():
            return [GenerationOutput(finish_reason="abort") for _ in requests]
        started = time.perf_counter()
        outputs: list[GenerationOutput] = []
        # Contiguous shares, one per engine (sequentially: colocated engines share the device).
        share = -(-len(requests) // len(self.engines))
        for k, engine in enumerate(self.engines):
            part = requests[k * share : (k + 1) * share]
            if part:
                outputs.extend(engine.generate(part, params, should_abort=self._abort, on_finish=self._on_finish))
        self.generate_seconds += time.perf_counter() - started
        self.engine_calls += 1
        return outputs
