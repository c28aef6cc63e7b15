"""manage.py launch_demo (scripts/demo.sh): the CPU demo as a run of the given user, once."""

import pytest
from django.core.management import CommandError, call_command

from rlweb.runs.models import Run

pytestmark = pytest.mark.django_db


def test_it_launches_the_demo_preset_for_the_user_once(alice, presets_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as sent:
        call_command("launch_demo", "--user", "alice")
    run = Run.objects.get()
    assert (run.owner, run.preset, run.status, run.name, run.total_steps) == (alice, "tiny-arith-grpo", "queued", "tiny demo", 60)
    assert len(sent) == 1  # the training task goes to the worker
    call_command("launch_demo", "--user", "alice")  # scripts/demo.sh run again: no second demo
    assert Run.objects.count() == 1
    Run.objects.update(status="completed")
    call_command("launch_demo", "--user", "alice")  # the last one finished: a fresh demo
    assert Run.objects.count() == 2


def test_it_names_a_missing_user(presets_dir):
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("launch_demo", "--user", "nobody")
