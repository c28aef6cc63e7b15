"""Create the first admin (idempotent): `manage.py ensure_admin --username admin --password ...`."""

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Create a staff superuser if no user of that name exists (safe to run again)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("RLWEB_ADMIN_USER", "admin"))
        parser.add_argument("--password", default=os.environ.get("RLWEB_ADMIN_PASSWORD"))
        parser.add_argument("--email", default="")

    def handle(self, *args, username, password, email, **options):
        if not password:
            raise CommandError("give --password (or set RLWEB_ADMIN_PASSWORD)")
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=username, defaults={"email": email, "is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(password)
            user.save()
            self.stdout.write(self.style.SUCCESS(f"created admin {username!r}"))
        else:
            self.stdout.write(f"admin {username!r} already exists; left unchanged")
