"""Shared fixtures. Tests run against real Postgres and Redis (DATABASE_URL / REDIS_URL, set by
scripts/test.sh); the named users follow the house convention: alice owns things, bob is
another user who must not see them, charlie has no objects at all, and staff sees everything."""

import os
import tempfile

# Settings are read at import; give the test run its own data directory unless told otherwise.
os.environ.setdefault("DATA_DIR", os.path.join(tempfile.gettempdir(), "rlweb-test-data"))

import pytest  # noqa: E402


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-password-1")


@pytest.fixture
def charlie(django_user_model):
    return django_user_model.objects.create_user("charlie", password="charlie-password-1")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("sam", password="sam-password-1", is_staff=True)


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, plus, just before it is dropped, an end to the sessions
    that threads of this process (async consumers' executor threads, reporter writer threads) or
    a subprocess still exiting keep open on it: the drop never fails, and no stale test database
    is left behind for the next run."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


# --- live stack and browser (end-to-end tests) -------------------------------------------

# Playwright's sync API runs an event loop in the test thread; the ORM calls the tests make
# around it are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="module")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    """daphne + one Celery worker (with beat) on the test database, for one test module.

    Per module, not per session: a worker left running would pick up the tasks that later,
    non-browser tests enqueue (launch, resume) and race them on the same rows. The broker queue
    is emptied first, so no task left over from an earlier module runs here."""
    from tests.support.live import LiveStack, purge_broker, stack_env, start_web

    log_dir = tmp_path_factory.mktemp("live-stack")
    env = stack_env(RUN_LOST_AFTER_SECONDS=20, RUN_HEARTBEAT_SECONDS=2)
    purge_broker()
    web, url = start_web(env, log_dir)
    stack = LiveStack(url=url, env=env, log_dir=log_dir, web=web)
    stack.add_worker("worker", beat=True)
    yield stack
    stack.stop()
    purge_broker()


@pytest.fixture(scope="module")
def browser():
    """Chromium, per test module. Playwright's sync API marks an event loop as running in the
    test thread while it is started; a session-wide browser would leave it so for every later
    test, and asyncio.run / async_to_sync there would refuse to run."""
    from tests.support.browser import CHROMIUM_ARGS, chromium_path

    path = chromium_path()
    if not path:
        pytest.fail("Debian's chromium is not installed (scripts/test.sh installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()
