import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_migrations_are_up_to_date():
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits non-zero when a migration is missing
        pytest.fail(f"missing migrations (exit {exc.code}):\n{out.getvalue()}")


@pytest.mark.django_db
def test_ensure_admin_creates_the_first_admin_once(django_user_model):
    out = io.StringIO()
    call_command("ensure_admin", "--username", "root", "--password", "s3cret-pass", stdout=out)
    call_command("ensure_admin", "--username", "root", "--password", "other-pass", stdout=out)
    admin = django_user_model.objects.get(username="root")
    assert admin.is_staff and admin.is_superuser
    assert admin.check_password("s3cret-pass")  # the second call changed nothing
    assert "already exists" in out.getvalue()


@pytest.mark.django_db
def test_ensure_admin_refuses_to_run_without_a_password(monkeypatch):
    from django.core.management.base import CommandError

    monkeypatch.delenv("RLWEB_ADMIN_PASSWORD", raising=False)
    with pytest.raises(CommandError, match="password"):
        call_command("ensure_admin", "--username", "root")


def test_plotly_and_htmx_are_served_locally(client, django_user_model):
    # Static files come from installed packages through whitenoise: nothing loads from a CDN.
    from django.contrib.staticfiles import finders

    assert finders.find("plotly/plotly.min.js")
    assert finders.find("django_htmx/htmx-2.min.js")
