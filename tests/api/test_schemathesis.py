"""The served OpenAPI schema, fuzzed by schemathesis against the app in-process: every
operation, generated and negative inputs, with a token of a test user. No 5xx, no response that
its schema does not describe (status code, content type, body, headers), invalid input refused,
anonymous calls refused. A stateful pass follows the inferred links (launch a run, then read,
cancel, resume, clone it...)."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from rest_framework.test import APIClient
from schemathesis.config import SchemathesisConfig
from schemathesis.generation import GenerationMode

from rlweb.api.tokens import issue_token
from rlweb.datasets.models import Dataset, DatasetRow
from rlweb.judgers.models import JudgerConfig

from .conftest import make_run_with_data

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

MAX_EXAMPLES = 12
STATEFUL_EXAMPLES = 25
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "negative_data_rejection",
    "ignored_auth",
    "use_after_free",
]


class InTransactionWSGI:
    """Django's WSGI handler for calls made inside a test's transaction: like Django's test
    client, keep the request signals from closing the connection that holds the transaction."""

    def __init__(self):
        self.handler = WSGIHandler()
        self.calls = 0

    def __call__(self, environ, start_response):
        self.calls += 1
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            return self.handler(environ, start_response)
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)


@pytest.fixture
def served_schema(alice, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"user": "100000/min", "heavy": "100000/min"}}
    run = make_run_with_data(alice)
    dataset = Dataset.objects.create(owner=alice, name="fuzz data", status="ready", row_count=1, train_count=1)
    DatasetRow.objects.create(dataset=dataset, index=0, prompt="1+1", answer="2")
    judger = JudgerConfig.objects.create(owner=alice, name="fuzz judger", kind="numeric")
    token = issue_token(alice).key

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    raw = client.get("/api/schema/?format=json").json()

    config = SchemathesisConfig.from_dict(
        {
            "headers": {"Authorization": f"Token {token}"},
            "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
            "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        }
    )
    schema = schemathesis.openapi.from_dict(raw, config=config)
    schema.app = InTransactionWSGI()
    schema.test_objects = {"run": run, "dataset": dataset, "judger": judger, "sample": run.trajectories.first()}
    return schema


def objects_for(path: str, objects) -> dict:
    if path.startswith("/api/runs/{run_id}/"):
        return {"run_id": objects["run"].pk, "step": 5, "sample_id": objects["sample"].pk}
    for prefix, kind in (("/api/runs/{id}/", "run"), ("/api/datasets/{id}/", "dataset"), ("/api/judgers/{id}/", "judger")):
        if path.startswith(prefix):
            return {"id": objects[kind].pk}
    return {}


def fuzz_operation(operation, mode: GenerationMode, failures: list[str], path_parameters=None) -> int:
    """Run up to MAX_EXAMPLES generated cases of one operation; record (not raise) failures so one
    run reports every broken operation."""
    calls = 0

    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None,
              phases=[Phase.explicit, Phase.generate])
    def run(case):
        nonlocal calls
        calls += 1
        case.call_and_validate()

    try:
        run()
    except Unsatisfiable:
        pass  # nothing of this operation can be made invalid (e.g. no parameters in negative mode)
    except BaseException as exc:  # noqa: BLE001 — FailureGroup is a BaseExceptionGroup; collected and asserted below
        failures.append(f"{mode.value} {operation.label} {path_parameters or ''}: {exc}")
    return calls


def test_every_operation_conforms_to_the_served_schema(served_schema):
    failures: list[str] = []
    operations = [result.ok() for result in served_schema.get_all_operations()]
    assert len(operations) > 20
    calls = 0
    objects = served_schema.test_objects
    for operation in operations:
        # Generated ids mostly miss (404s, malformed ids); the test user's own objects get the
        # generated queries and bodies deep into the views.
        real_ids = objects_for(operation.path, objects)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            calls += fuzz_operation(operation, mode, failures)
            if real_ids:
                calls += fuzz_operation(operation, mode, failures, real_ids)
    assert not failures, "\n\n".join(failures)
    assert calls > len(operations) * 4
    assert served_schema.app.calls >= calls


def test_stateful_sequences_follow_the_links_between_operations(served_schema):
    """Sequences of calls along the links schemathesis infers from the schema (a created or
    listed object's id fed to its detail, actions, children and delete), checked the same way.
    Each scenario starts from the same database state (a savepoint rolled back after it)."""
    inference = served_schema.apply_stateful_inference(None)
    assert inference.total > 20  # links were found: runs, datasets, judgers and their children

    class Scenarios(served_schema.as_state_machine()):
        def setup(self):
            self.savepoint = transaction.savepoint()

        def teardown(self):
            transaction.savepoint_rollback(self.savepoint)

    Scenarios.run(settings=settings(
        max_examples=STATEFUL_EXAMPLES, stateful_step_count=6, phases=[Phase.generate], deadline=None,
        suppress_health_check=list(HealthCheck), database=None,
    ))
    assert served_schema.app.calls > STATEFUL_EXAMPLES * 2
