"""Launch the CPU demo preset as a run of the given user, unless one is already queued or running.

scripts/demo.sh calls it right after starting the worker, so that a new user who opens the page
sees a reward curve climbing within a couple of minutes."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from rlweb.runs.models import Run
from rlweb.runs.services import DEMO_PRESET, launch_run
from workers.rl.config import ConfigError, load_preset


class Command(BaseCommand):
    help = "Launch the CPU demo run (preset tiny-arith-grpo) for a user, if none is active."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="owner of the demo run")
        parser.add_argument("--preset", default=DEMO_PRESET)
        parser.add_argument("--force", action="store_true", help="launch even if a demo run is active")

    def handle(self, *args, user, preset, force, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"no user {user!r} (create it first, e.g. manage.py ensure_admin)")
        active = Run.objects.filter(owner=owner, preset=preset, status__in=Run.ACTIVE).first()
        if active and not force:
            self.stdout.write(f"demo run #{active.pk} is already {active.status}; not launching another")
            return
        try:
            config = load_preset(preset)
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
        run = launch_run(owner, config.model_dump(mode="json"), preset=preset)
        self.stdout.write(self.style.SUCCESS(f"launched demo run #{run.pk} ({run.name}) for {owner.username}"))
