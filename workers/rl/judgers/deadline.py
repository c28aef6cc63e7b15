"""Run a CPU-bound function under a time limit, from any thread or event loop.

Python can only interrupt running Python code with a signal, and signals are delivered to the
main thread only. So:
- `call_with_deadline` uses SIGALRM (setitimer, fractional seconds) and works in the main thread;
- `run_isolated` sends the call to a small pool of worker processes (spawned, so nothing of a
  torch- or thread-laden parent is forked), where the function runs in the child's main thread
  and can use `call_with_deadline` itself. A hard backstop in the parent terminates the pool if a
  child stops answering (stuck in C code, killed), so a caller never waits forever.
This is what math-verify needs: its own signal-based timeouts raise "signal only works in main
thread" in a web request thread, a Ray actor or an asyncio executor.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import multiprocessing
import os
import signal
import threading
from typing import Any, Callable

logger = logging.getLogger(__name__)


class DeadlineExceeded(BaseException):
    """Raised into the running code when its time is up. A BaseException so that library code's
    `except Exception` (sympy and math-verify have many) cannot swallow it."""


def signals_available() -> bool:
    return threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")


def call_with_deadline(fn: Callable[..., Any], seconds: float, *args: Any) -> Any:
    """fn(*args), interrupted with DeadlineExceeded after `seconds`. Main thread only."""
    if not signals_available():
        raise RuntimeError("call_with_deadline needs the main thread (signals); use run_isolated")

    def on_alarm(signum, frame):
        raise DeadlineExceeded(f"took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class IsolationUnavailable(RuntimeError):
    """Worker processes cannot be started here (e.g. inside a daemonic process)."""


class WorkerRestarted(RuntimeError):
    """The isolated worker pool was terminated while this call was in flight."""


class _Isolated:
    """A lazily started spawn-process pool shared by every judger of this process."""

    def __init__(self, processes: int):
        self.processes = processes
        self._lock = threading.Lock()
        self._pool = None
        self._in_flight: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._next_id = 0
        self.unavailable: str | None = None  # why worker processes cannot start here, once known

    def _get_pool(self):
        with self._lock:
            if self.unavailable:
                raise IsolationUnavailable(self.unavailable)
            if self._pool is None:
                context = multiprocessing.get_context("spawn")
                try:
                    self._pool = context.Pool(processes=self.processes)
                except (AssertionError, OSError) as exc:  # "daemonic processes are not allowed to have children"
                    self.unavailable = f"{type(exc).__name__}: {exc}"
                    raise IsolationUnavailable(self.unavailable) from exc
                logger.info("started %d isolated judge worker process(es)", self.processes)
            return self._pool

    def terminate(self, reason: str, level: int = logging.WARNING) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            in_flight, self._in_flight = self._in_flight, {}
        if pool is not None:
            logger.log(level, "terminating isolated judge workers: %s", reason)
            pool.terminate()
        for loop, future in in_flight.values():
            _settle(loop, future, exception=WorkerRestarted(reason))

    async def run(self, fn: Callable[..., Any], args: tuple, backstop_s: float) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        pool = self._get_pool()
        with self._lock:
            call_id = self._next_id
            self._next_id += 1
            self._in_flight[call_id] = (loop, future)

        def done(result):
            self._in_flight.pop(call_id, None)
            _settle(loop, future, result=result)

        def failed(exc):
            self._in_flight.pop(call_id, None)
            _settle(loop, future, exception=exc)

        try:
            pool.apply_async(fn, args, callback=done, error_callback=failed)
        except ValueError as exc:  # "Pool not running": another call terminated it just now
            self._in_flight.pop(call_id, None)
            raise WorkerRestarted(str(exc)) from None
        try:
            return await asyncio.wait_for(future, backstop_s)
        except asyncio.TimeoutError:
            self.terminate(f"a call to {fn.__name__} did not return within {backstop_s:g} s")
            raise DeadlineExceeded(f"no answer from the worker process within {backstop_s:g} s") from None
        finally:
            self._in_flight.pop(call_id, None)


def _settle(loop: asyncio.AbstractEventLoop, future: asyncio.Future, result: Any = None, exception: BaseException | None = None) -> None:
    """Complete an asyncio future from the pool's result thread (thread-safe, idempotent)."""

    def apply():
        if future.done():
            return
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)

    try:
        loop.call_soon_threadsafe(apply)
    except RuntimeError:  # the loop was closed meanwhile: nobody is waiting any more
        pass


_ISOLATED = _Isolated(processes=max(1, min(2, os.cpu_count() or 1)))
atexit.register(lambda: _ISOLATED.terminate("interpreter exit", logging.DEBUG))

# Time allowed beyond the deadline itself before the parent gives up on a worker process: covers
# spawning the pool and the child's imports on a busy machine.
BACKSTOP_GRACE_S = 30.0


def _child_entry(fn: Callable[..., Any], args: tuple, seconds: float | None, warmup: Callable[[], Any] | None) -> tuple[str, Any]:
    """Runs in the worker process. Never lets DeadlineExceeded out: a BaseException would kill
    the pool worker and its result would never come back."""
    if warmup is not None:
        warmup()  # imports happen before the clock starts
    if seconds is None:
        return "ok", fn(*args)
    try:
        return "ok", call_with_deadline(fn, seconds, *args)
    except DeadlineExceeded as exc:
        return "deadline", str(exc)


async def run_isolated(
    fn: Callable[..., Any],
    args: tuple,
    seconds: float | None,
    *,
    warmup: Callable[[], Any] | None = None,
    backstop_s: float | None = None,
) -> Any:
    """fn(*args) in a worker process under a `seconds` deadline (None: no deadline inside).

    fn and warmup must be module-level functions and args picklable. Raises DeadlineExceeded
    when the deadline passes in the child, or when no answer arrives within `backstop_s`
    (default: seconds + BACKSTOP_GRACE_S; the pool is then restarted). A call caught in a
    restart caused by another call is retried once on the fresh pool.
    """
    if backstop_s is None:
        backstop_s = (seconds or 0.0) + BACKSTOP_GRACE_S
    call = (_child_entry, (fn, args, seconds, warmup), backstop_s)
    try:
        tag, value = await _ISOLATED.run(*call)
    except WorkerRestarted:
        tag, value = await _ISOLATED.run(*call)
    if tag == "deadline":
        raise DeadlineExceeded(value)
    return value


async def run_with_deadline(
    fn: Callable[..., Any],
    args: tuple,
    seconds: float,
    *,
    warmup: Callable[[], Any] | None = None,
    isolate: bool | None = None,
) -> Any:
    """fn(*args) under a deadline, from async code in any thread.

    In the main thread (isolate None or False) it runs inline with SIGALRM: no process hop, but
    it holds the event loop for up to `seconds`. Elsewhere (or isolate=True) it runs in a worker
    process. Raises DeadlineExceeded when time is up.
    """
    if isolate or (isolate is None and not signals_available()):
        try:
            return await run_isolated(fn, args, seconds, warmup=warmup)
        except IsolationUnavailable as exc:
            return await _in_thread(fn, args, seconds, warmup, reason=str(exc))
    if isolate is False and not signals_available():
        raise RuntimeError("isolate=False needs the main thread")
    if warmup is not None:
        warmup()
    return call_with_deadline(fn, seconds, *args)


_warned_about_threads = False


async def _in_thread(fn: Callable[..., Any], args: tuple, seconds: float, warmup: Callable[[], Any] | None, reason: str) -> Any:
    """Last resort where no worker process can start: a thread and a timeout on the wait. The
    caller gets DeadlineExceeded on time, but a runaway computation keeps its thread busy."""
    global _warned_about_threads
    if not _warned_about_threads:
        _warned_about_threads = True
        logger.warning("no worker processes here (%s): deadlines only stop the wait, not the computation", reason)
    if warmup is not None:
        warmup()  # before the clock starts (imports); holds the loop once, briefly
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def work():
        try:
            _settle(loop, future, result=fn(*args))
        except BaseException as exc:  # handed to the waiting coroutine
            _settle(loop, future, exception=exc)

    # A daemon thread of its own, not the loop's executor: asyncio.run waits for its executor's
    # threads at exit, which would make a runaway computation block the caller after all.
    threading.Thread(target=work, name="judge-deadline", daemon=True).start()
    try:
        return await asyncio.wait_for(future, seconds)
    except asyncio.TimeoutError:
        raise DeadlineExceeded(f"took longer than {seconds:g} s") from None


def terminate_isolated_workers() -> None:
    """Stop the worker processes now (they restart on the next call). For tests and shutdown."""
    _ISOLATED.terminate("requested", logging.INFO)
