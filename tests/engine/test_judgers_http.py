"""The http judger against a real reward service on 127.0.0.1: good, slow, garbage, flaky."""

import asyncio
import json
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workers.rl.judgers.build import build_judger, judge_one
from workers.rl.judgers.spec import HttpSpec, RouterSpec
from workers.rl.sample import Sample, SampleStatus

GARBAGE = {
    "not-json": (b"<html>502 Bad Gateway</html>", "text/html"),
    "no-score": (b'{"value": 1}', "application/json"),
    "text-score": (b'{"score": "high"}', "application/json"),
    "bool-score": (b'{"score": true}', "application/json"),
    "nan-score": (b'{"score": NaN}', "application/json"),
    "list": (b"[1, 2]", "application/json"),
}


class RewardService(BaseHTTPRequestHandler):
    """A small reward service. The path picks the behaviour; it records what it received."""

    received: list = []
    attempts: Counter = Counter()
    in_flight = 0  # requests to /busy being answered now
    peak = 0
    lock = threading.Lock()

    def log_message(self, *args):  # keep test output clean
        pass

    def _answer(self, status, body: bytes, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        self.path = self.path.split("?", 1)[0]
        busy = self.path == "/busy"
        with cls.lock:
            cls.received.append({"path": self.path, "body": body, "authorization": self.headers.get("Authorization")})
            cls.attempts[(self.path, body["uid"])] += 1
            attempt = cls.attempts[(self.path, body["uid"])]
            cls.in_flight += busy
            cls.peak = max(cls.peak, cls.in_flight)
        try:
            self._route(body, attempt)
        finally:
            with cls.lock:
                cls.in_flight -= busy

    def _route(self, body, attempt):
        path = self.path
        if path == "/slow" and body["response"] == "sleep":
            time.sleep(2.0)
        if path == "/busy":
            time.sleep(0.05)
        if path.startswith("/garbage/"):
            payload, content_type = GARBAGE[path.removeprefix("/garbage/")]
            return self._answer(200, payload, content_type)
        if path == "/flaky" and attempt == 1:
            return self._answer(500, b"internal error, try again")
        if path == "/down":
            return self._answer(503, b"service unavailable")
        if path == "/forbidden":
            return self._answer(403, b"bad token")
        right = body["label"] is not None and body["response"].strip() == body["label"].strip()
        answer = {
            "score": 1.0 if right else 0.0,
            "format": 0.5,
            "explanation": "the response equals the label" if right else "the response differs from the label",
            "model": "rm-v1",
        }
        return self._answer(200, json.dumps(answer).encode())


@pytest.fixture(scope="module")
def service():
    server = ThreadingHTTPServer(("127.0.0.1", 0), RewardService)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def fresh_records():
    RewardService.received = []
    RewardService.attempts = Counter()
    RewardService.peak = 0


def make_sample(response, label="72", uid="u1"):
    return Sample(
        uid=uid, group_id="g", prompt="What is 8*9?", prompt_ids=[5], label=label, data_source="arith", response=response, metadata={"row": 7}
    )


def http_judger(url, **params):
    judger = build_judger(HttpSpec(url=url, **params))
    judger.backoff_s = 0.05  # keep retries quick in tests
    return judger


def run(judger, coro_fn):
    async def scenario():
        try:
            return await coro_fn(judger)
        finally:
            await judger.aclose()

    return asyncio.run(scenario())


def test_it_posts_the_sample_and_reads_score_components_and_explanation(service):
    judger = http_judger(f"{service}/good", headers={"Authorization": "Bearer s3cret"})
    sample = run(judger, lambda j: j.judge(make_sample("72")))
    assert sample.reward == {"score": 1.0, "format": 0.5}
    assert sample.status != SampleStatus.FAILED
    assert sample.explanation == "remote judger scored 1; components format=0.5; ignored non-numeric fields model: the response equals the label"
    [request] = RewardService.received
    assert request["body"] == {"prompt": "What is 8*9?", "response": "72", "label": "72", "data_source": "arith", "uid": "u1", "metadata": {"row": 7}}
    assert request["authorization"] == "Bearer s3cret"


def test_a_slow_service_times_out_fails_that_sample_and_the_next_samples_still_work(service):
    judger = http_judger(f"{service}/slow", timeout_s=0.3, retries=1)
    samples = [make_sample("sleep", uid="slow"), make_sample("72", uid="a"), make_sample("71", uid="b")]
    started = time.monotonic()
    judged = run(judger, lambda j: j.judge_many(samples))
    assert time.monotonic() - started < 2.0  # two 0.3 s attempts, not the 2 s the service sleeps
    assert judged[0].status == SampleStatus.FAILED
    assert judged[0].reward == {"score": 0.0}
    assert judged[0].error == f"http judger: timed out after 0.3 s (2 attempts) at {service}/slow"
    assert [s.score for s in judged[1:]] == [1.0, 0.0]
    assert all(s.status != SampleStatus.FAILED for s in judged[1:])
    # And the judger keeps working afterwards.
    assert run(judger, lambda j: j.judge(make_sample("72", uid="c"))).score == 1.0


@pytest.mark.parametrize(
    "kind,message",
    [
        ("not-json", "http judger: the answer is not JSON: '<html>502 Bad Gateway</html>'"),
        ("no-score", "http judger: the answer has no 'score' (keys: value)"),
        ("text-score", "http judger: 'score' is not a number: \"high\""),
        ("bool-score", "http judger: 'score' is not a number: true"),
        ("nan-score", "http judger: 'score' is not finite: nan"),
        ("list", "http judger: the answer is not a JSON object: '[1, 2]'"),
    ],
)
def test_garbage_answers_fail_the_sample_with_the_reason(service, kind, message):
    sample = run(http_judger(f"{service}/garbage/{kind}"), lambda j: j.judge(make_sample("72")))
    assert sample.status == SampleStatus.FAILED
    assert sample.error == message
    assert RewardService.attempts[(f"/garbage/{kind}", "u1")] == 1  # a bad answer is not retried


def test_a_500_is_retried_and_the_retry_succeeds(service):
    sample = run(http_judger(f"{service}/flaky", retries=2), lambda j: j.judge(make_sample("72")))
    assert sample.status != SampleStatus.FAILED, sample.error
    assert sample.score == 1.0
    assert RewardService.attempts[("/flaky", "u1")] == 2


def test_a_service_that_stays_down_fails_after_all_retries(service):
    sample = run(http_judger(f"{service}/down", retries=2), lambda j: j.judge(make_sample("72")))
    assert sample.error == f"http judger: server answered 503: 'service unavailable' (3 attempts) at {service}/down"
    assert RewardService.attempts[("/down", "u1")] == 3


def test_a_4xx_is_not_retried(service):
    sample = run(http_judger(f"{service}/forbidden", retries=3), lambda j: j.judge(make_sample("72")))
    assert sample.error == f"http judger: server answered 403 at {service}/forbidden: 'bad token'"
    assert RewardService.attempts[("/forbidden", "u1")] == 1


def test_connection_refused_fails_after_retries():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sample = run(http_judger(f"http://127.0.0.1:{port}/score", retries=1), lambda j: j.judge(make_sample("72")))
    assert sample.status == SampleStatus.FAILED
    assert sample.error.startswith("http judger: connection failed: ConnectError")
    assert sample.error.endswith(f"(2 attempts) at http://127.0.0.1:{port}/score")


def test_requests_in_flight_are_bounded_by_max_concurrency(service):
    judger = http_judger(f"{service}/busy", max_concurrency=3)
    samples = [make_sample("72", uid=str(i)) for i in range(12)]
    judged = run(judger, lambda j: j.judge_many(samples))
    assert [s.score for s in judged] == [1.0] * 12
    assert RewardService.peak == 3


def test_messages_never_show_credentials_in_the_url(service):
    url = service.replace("http://", "http://user:pw@") + "/forbidden?token=abc"
    sample = run(http_judger(url, retries=0), lambda j: j.judge(make_sample("72")))
    assert "pw" not in sample.error and "abc" not in sample.error
    assert f"at {service}/forbidden:" in sample.error


def test_judge_one_with_an_http_judger_and_a_router_around_it(service):
    outcome = judge_one(HttpSpec(url=f"{service}/good"), "71", "72")
    assert (outcome.score, outcome.components, outcome.status) == (0.0, {"format": 0.5}, "completed")
    spec = RouterSpec(
        mode="weighted_sum",
        components=[
            {"name": "rm", "weight": 2.0, "judger": {"kind": "http", "url": f"{service}/good"}},
            {"name": "acc", "weight": 1.0, "judger": {"kind": "numeric"}},
        ],
    )
    outcome = judge_one(spec, "72", "72")
    assert outcome.score == 3.0  # 2 * 1 + 1 * 1
    assert outcome.components == {"rm": 1.0, "rm.format": 0.5, "acc": 1.0}
    slow = judge_one(HttpSpec(url=f"{service}/slow", timeout_s=0.2, retries=0), "sleep", "72")
    assert slow.status == "failed"
    assert slow.error == f"http judger: timed out after 0.2 s (1 attempt) at {service}/slow"


def test_one_judger_serves_several_event_loops(service):
    # The trainer keeps one loop; judge_one and tests make one per call. The client follows.
    judger = http_judger(f"{service}/good")
    assert asyncio.run(judger.judge(make_sample("72"))).score == 1.0
    assert asyncio.run(judger.judge(make_sample("71"))).score == 0.0
    judger.close()
