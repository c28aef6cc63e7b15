"""A live stack for end-to-end tests: daphne (HTTP + WebSocket) and a Celery worker, as real
subprocesses, on the test database. Tests that use it need `transactional_db` so that what they
write is committed and visible to the subprocesses."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_database_url() -> str:
    """DATABASE_URL of the database pytest-django created (test_<name>)."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        raise RuntimeError("the live stack needs Postgres (set DATABASE_URL)")
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def purge_broker():
    """Drop every message waiting in the Celery broker of the test run."""
    from rlweb.celery import app

    with app.connection_for_write() as conn:
        app.control.purge(connection=conn)


def stack_env(**extra) -> dict:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=test_database_url(),
        DJANGO_SETTINGS_MODULE="rlweb.settings",
        PYTHONUNBUFFERED="1",
        DATA_DIR=str(settings.DATA_DIR),
    )
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log_path: Path

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def start(name: str, argv: list[str], env: dict, log_dir: Path) -> Process:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    out = open(log_path, "ab")
    # Own process group: stop() can signal the whole tree (Celery's pool children included).
    popen = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return Process(name, popen, log_path)


def start_web(env: dict, log_dir: Path) -> tuple[Process, str]:
    port = free_port()
    proc = start("daphne", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "rlweb.asgi:application"], env, log_dir)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/healthz", proc)
    return proc, url


def start_worker(env: dict, log_dir: Path, name: str = "worker", beat: bool = False) -> Process:
    argv = [sys.executable, "-m", "celery", "-A", "rlweb", "worker", "--loglevel=INFO", "--concurrency=1", "-n", f"{name}@%h"]
    if beat:
        argv += ["-B", "-s", str(log_dir / f"{name}-beat-schedule")]
    return start(name, argv, env, log_dir)


def wait_http(url: str, proc: Process, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited early:\n{proc.log()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer within {timeout}s:\n{proc.log()[-4000:]}")


@dataclass
class LiveStack:
    url: str
    env: dict
    log_dir: Path
    web: Process
    workers: list[Process] = field(default_factory=list)

    def add_worker(self, name: str = "worker", beat: bool = False) -> Process:
        proc = start_worker(self.env, self.log_dir, name=name, beat=beat)
        self.workers.append(proc)
        return proc

    def stop(self):
        for proc in [*self.workers, self.web]:
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log()[-3000:]}" for p in [self.web, *self.workers])
