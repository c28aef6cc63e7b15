"""A local reward service on 127.0.0.1 (random port) that answers well, slowly, or with garbage."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class RewardService:
    def __init__(self):
        self.mode = "ok"  # ok | slow | garbage | no_score | error500
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                service.requests.append(json.loads(body or b"{}"))
                service.headers.append(dict(self.headers))
                if service.mode == "slow":
                    time.sleep(2.0)
                if service.mode == "error500":
                    self._answer(500, b"overloaded")
                elif service.mode == "garbage":
                    self._answer(200, b"<html>definitely not json</html>")
                elif service.mode == "no_score":
                    self._answer(200, json.dumps({"reward": 1}).encode())
                else:
                    request = service.requests[-1]
                    score = 1.0 if request.get("response", "").strip() == (request.get("label") or "") else 0.25
                    self._answer(200, json.dumps({"score": score, "fluency": 0.5, "explanation": "compared by the service"}).encode())

            def _answer(self, status, body):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): expected in the slow case

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/score"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def reward_service():
    service = RewardService()
    yield service
    service.close()
