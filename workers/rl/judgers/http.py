"""A remote reward service: POST the sample as JSON, read {"score": number, ...} back.

Request body: {"prompt", "response", "label", "data_source", "uid", "metadata"}.
Answer: a JSON object with a numeric "score"; other numeric fields become reward components;
an optional string "explanation" is shown to people; other fields are ignored.

Timeouts, connection errors and 5xx/429 answers are retried with exponential backoff (with
jitter, so many samples retrying at once do not hammer a struggling service in lockstep); other
4xx answers and malformed bodies fail the sample at once, with the reason. Headers (tokens) are
sent but never written into messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
from urllib.parse import urlsplit, urlunsplit

import httpx

from workers.rl.judgers.base import Judger, JudgeError, Verdict
from workers.rl.judgers.extract import format_number, quote, shorten
from workers.rl.judgers.spec import HttpSpec
from workers.rl.sample import Sample

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504}) | frozenset(range(505, 600))


def public_url(url: str) -> str:
    """The URL without user:password and query string (either may hold a secret)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Retryable(Exception):
    """One attempt failed in a way worth retrying; the message says how."""


class HttpJudger(Judger):
    """The remote service's score. One judger serves one event loop at a time (a new loop, as
    in successive judge_one calls, gets a fresh client; the old one is closed)."""

    kind = "http"
    spec: HttpSpec

    def __init__(self, spec: HttpSpec, *, backoff_s: float = 0.5, max_backoff_s: float = 8.0):
        super().__init__(spec)
        self.url = str(spec.url)
        self.where = public_url(self.url)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        # An httpx client and a semaphore belong to the event loop that made them; judge_one
        # makes a new loop per call, the trainer keeps one. So both are made per loop.
        self._client: httpx.AsyncClient | None = None
        self._limit: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def max_concurrency(self) -> int:
        return self.spec.max_concurrency

    def _session(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self.close()  # a client from an earlier loop
            limit = self.spec.max_concurrency
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.spec.timeout_s),
                limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
                headers={"Content-Type": "application/json", **self.spec.headers},
                follow_redirects=False,
            )
            self._limit = asyncio.Semaphore(limit)
            self._loop = loop
        return self._client, self._limit

    def payload(self, sample: Sample) -> bytes:
        body = {
            "prompt": sample.prompt,
            "response": sample.response,
            "label": sample.label,
            "data_source": sample.data_source,
            "uid": sample.uid,
            "metadata": sample.metadata,
        }
        # default=str: metadata may hold values JSON has no type for (dates, numpy scalars).
        return json.dumps(body, default=str).encode()

    async def verdict(self, sample: Sample) -> Verdict:
        client, limit = self._session()
        body = self.payload(sample)
        attempts = self.spec.retries + 1
        async with limit:
            for attempt in range(attempts):
                try:
                    return self._read_answer(await self._post(client, body))
                except _Retryable as exc:
                    if attempt + 1 == attempts:
                        plural = "s" if attempts > 1 else ""
                        raise JudgeError(f"http judger: {exc} ({attempts} attempt{plural}) at {self.where}") from None
                    delay = min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)
                    logger.info("http judger: %s at %s; retry %d/%d in %.2f s", exc, self.where, attempt + 1, self.spec.retries, delay)
                    await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _post(self, client: httpx.AsyncClient, body: bytes) -> httpx.Response:
        timeout = self.spec.timeout_s
        try:
            # wait_for bounds the whole exchange; httpx's own timeout bounds each read, and a
            # service that trickles bytes would otherwise never time out.
            response = await asyncio.wait_for(client.post(self.url, content=body), timeout)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            raise _Retryable(f"timed out after {timeout:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"connection failed: {type(exc).__name__}: {exc or 'no detail'}") from None
        if response.status_code in RETRY_STATUSES:
            raise _Retryable(f"server answered {response.status_code}: {quote(response.text, 200)}")
        if response.status_code >= 400:
            raise JudgeError(f"http judger: server answered {response.status_code} at {self.where}: {quote(response.text, 200)}")
        return response

    def _read_answer(self, response: httpx.Response) -> Verdict:
        try:
            answer = response.json()
        except ValueError:
            raise JudgeError(f"http judger: the answer is not JSON: {quote(response.text, 200)}") from None
        if not isinstance(answer, dict):
            raise JudgeError(f"http judger: the answer is not a JSON object: {quote(response.text, 200)}")
        if "score" not in answer:
            raise JudgeError(f"http judger: the answer has no 'score' (keys: {', '.join(sorted(answer)) or 'none'})")
        score = answer["score"]
        if not _is_number(score):
            raise JudgeError(f"http judger: 'score' is not a number: {shorten(json.dumps(score), 80)}")
        if not math.isfinite(score):
            raise JudgeError(f"http judger: 'score' is not finite: {score}")
        components = {
            name: float(value)
            for name, value in answer.items()
            if name not in ("score", "explanation") and _is_number(value) and math.isfinite(value)
        }
        ignored = sorted(name for name in answer if name not in components and name not in ("score", "explanation"))
        parts = [f"remote judger scored {format_number(float(score))}"]
        if components:
            parts.append("components " + ", ".join(f"{name}={format_number(value)}" for name, value in components.items()))
        if ignored:
            parts.append("ignored non-numeric fields " + ", ".join(ignored))
        explanation = "; ".join(parts)
        remote = answer.get("explanation")
        if isinstance(remote, str) and remote.strip():
            explanation += f": {remote.strip()}"
        return Verdict(float(score), explanation, components)

    async def aclose(self) -> None:
        client = self._client
        if client is not None and self._loop is asyncio.get_running_loop():
            self._client, self._loop = None, None
            await client.aclose()
        else:
            self.close()

    def close(self) -> None:
        client, loop = self._client, self._loop
        self._client, self._loop = None, None
        if client is None or loop is None or loop.is_closed():
            return  # nothing open, or its loop (and the sockets with it) is already gone
        # A client can only be closed in its own loop: schedule it there if that loop runs
        # (sync close() called from async code), else run the loop just for the close.
        if loop.is_running():
            loop.call_soon_threadsafe(lambda: loop.create_task(client.aclose()))
            return
        closing = client.aclose()
        try:
            loop.run_until_complete(closing)
        except RuntimeError as exc:  # another loop runs in this thread; the sockets go with GC
            closing.close()
            logger.debug("http judger: could not close the client of a previous loop: %s", exc)
