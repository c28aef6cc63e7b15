"""Live stream fan-out: 50 WebSocket clients watching one running run, over Redis.

A real daphne serves the run's stream (/ws/runs/<id>/, Redis channel layer); 50 clients, in a
separate process, connect with a signed-in session the way the run page does and subscribe from
cursor 0. This process then plays the worker: it reports steps through the real DB reporter
(workers.reporting.DBReporter: writer thread, COPY, commit, then "run.updated" to the run's
group), each step carrying the time it was reported as a metric value, plus a run's usual load
of other metrics. Each client records, for every point of that metric, when it arrived.

Latency = arrival at the client - the moment the engine handed the step to the reporter (so it
includes the reporter's queue, the write, the notification, the consumer's query and the send).
Loss = steps a client never received; doubles = steps a client received twice. Needs Postgres
and Redis:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rlweb_bench REDIS_URL=redis://127.0.0.1:6379/5 python bench/stream.py [--clients 50] [--steps 300] [--rate 10]

The last line is JSON: {"bench": "stream", "p50_ms", "p95_ms", "lost", ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _common import ensure_database, REPO_ROOT, emit

PROBE = "bench/sent_at"
FILLER_METRICS = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the clients (a separate process: their event loop must not share a GIL with the writer) ---


def run_clients(port: int, run_id: int, cookie: str, n: int, steps: int, ready, done_at, out_path: str):
    from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol

    results = [dict(latencies=[], steps=[], connected=False) for _ in range(n)]

    def protocol_for(index: int):
        class Client(WebSocketClientProtocol):
            def onOpen(self):
                results[index]["connected"] = True
                self.sendMessage(json.dumps({"type": "subscribe", "cursor": {}, "samples": False}).encode())

            def onMessage(self, payload, is_binary):
                now = time.time()
                msg = json.loads(payload)
                for step, name, value, _wall in msg.get("metrics", []):
                    if name == PROBE:
                        results[index]["latencies"].append(now - value)
                        results[index]["steps"].append(step)

        return Client

    async def main():
        loop = asyncio.get_running_loop()
        transports = []
        for i in range(n):
            factory = WebSocketClientFactory(
                f"ws://127.0.0.1:{port}/ws/runs/{run_id}/",
                headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"},
            )
            factory.protocol = protocol_for(i)
            transport, _ = await loop.create_connection(factory, "127.0.0.1", port)
            transports.append(transport)
        deadline = time.monotonic() + 30
        while not all(r["connected"] for r in results) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        ready.set()
        # Until the writer is done and every client has every step (or a grace period passed).
        while done_at.value == 0:
            await asyncio.sleep(0.1)
        grace_end = time.monotonic() + 10
        while time.monotonic() < grace_end and not all(len(set(r["steps"])) >= steps for r in results):
            await asyncio.sleep(0.1)
        for t in transports:
            t.close()

    asyncio.run(main())
    Path(out_path).write_text(json.dumps(results))


# --- the bench ----------------------------------------------------------------------------


def start_daphne(port: int, log_path: Path) -> subprocess.Popen:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="rlweb.settings", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "rlweb.asgi:application"],
        cwd=REPO_ROOT, env=env, stdout=open(log_path, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"daphne exited:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.25)
    raise SystemExit("daphne did not start")


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rate", type=float, default=10.0, help="steps reported per second")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlweb.settings")
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        raise SystemExit("bench/stream.py needs DATABASE_URL (Postgres) and REDIS_URL")
    import django

    ensure_database()

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.utils import timezone

    from rlweb.runs.models import Run
    from workers.reporting import DBReporter

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    run = Run.objects.create(owner=user, name="bench: stream", config={}, status=Run.Status.RUNNING, attempts=1,
                             total_steps=args.steps, started_at=timezone.now(), heartbeat_at=timezone.now())
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    work = Path(tempfile.mkdtemp(prefix="rlweb-bench-stream-"))
    port = free_port()
    daphne = start_daphne(port, work / "daphne.log")
    ctx = mp.get_context("spawn")
    ready, done_at = ctx.Event(), ctx.Value("d", 0.0)
    out_path = str(work / "clients.json")
    clients = ctx.Process(target=run_clients, args=(port, run.pk, cookie, args.clients, args.steps, ready, done_at, out_path))
    clients.start()
    try:
        if not ready.wait(60):
            raise SystemExit("the clients did not connect")
        time.sleep(1.0)  # let the initial (empty) pushes settle
        reporter = DBReporter(run.pk, 1, work / "run")
        interval = 1.0 / args.rate
        started = time.monotonic()
        for step in range(1, args.steps + 1):
            metrics = {f"filler/m{i:02d}": step * 0.001 * i for i in range(FILLER_METRICS)}
            metrics[PROBE] = time.time()
            reporter.log_step(step, metrics, [])
            time.sleep(max(0.0, started + step * interval - time.monotonic()))
        reporter.close()
        done_at.value = time.time()
        clients.join(60)
    finally:
        if clients.is_alive():
            clients.terminate()
        daphne.terminate()
        daphne.wait(10)
        Run.objects.filter(pk=run.pk).delete()

    results = json.loads(Path(out_path).read_text())
    latencies = [lat * 1000 for r in results for lat in r["latencies"]]
    expected = set(range(1, args.steps + 1))
    lost = sum(len(expected - set(r["steps"])) for r in results)
    doubles = sum(len(r["steps"]) - len(set(r["steps"])) for r in results)
    p50, p95, p99 = pct(latencies, 0.50), pct(latencies, 0.95), pct(latencies, 0.99)
    print(f"{args.clients} clients x {args.steps} steps at {args.rate}/s ({FILLER_METRICS + 1} metrics per step)")
    print(f"latency report->receipt: p50 {p50:.1f} ms  p95 {p95:.1f} ms  p99 {p99:.1f} ms  max {max(latencies):.1f} ms")
    print(f"received {len(latencies)} of {args.clients * args.steps}; lost {lost}; doubled {doubles}")
    emit({"bench": "stream", "p50_ms": round(p50, 1), "p95_ms": round(p95, 1), "p99_ms": round(p99, 1), "lost": lost,
          "doubled": doubles, "clients": args.clients, "steps": args.steps, "rate_per_s": args.rate,
          "mean_ms": round(statistics.fmean(latencies), 1)})


if __name__ == "__main__":
    main()
