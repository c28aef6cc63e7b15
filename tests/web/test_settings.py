"""Settings resolve from the environment: embedded defaults with nothing set, Postgres + Redis
when DATABASE_URL and REDIS_URL are given. Each mode is checked in a fresh interpreter because
settings are read once at import."""

import json
import os
import subprocess
import sys

PROBE = """
import json, django
from django.conf import settings
django.setup()
from channels.layers import get_channel_layer
print(json.dumps({
    "engine": settings.DATABASES["default"]["ENGINE"],
    "db_name": str(settings.DATABASES["default"]["NAME"]),
    "broker": settings.CELERY_BROKER_URL,
    "layer": type(get_channel_layer()).__name__,
    "embedded": settings.EMBEDDED,
    "model_roots": [str(p) for p in settings.MODEL_ROOTS],
    "debug": settings.DEBUG,
    "hosts": settings.ALLOWED_HOSTS,
}))
"""


def resolve(tmp_path, **env):
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "ALLOWED_HOSTS", "MODEL_ROOTS")}
    base.update(DJANGO_SETTINGS_MODULE="rlweb.settings", DATA_DIR=str(tmp_path / "data"))
    base.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=base, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_it_uses_sqlite_a_file_broker_and_an_in_memory_layer_when_nothing_is_set(tmp_path):
    resolved = resolve(tmp_path)
    assert resolved["engine"] == "django.db.backends.sqlite3"
    assert resolved["db_name"] == str(tmp_path / "data" / "rlweb.sqlite3")
    assert resolved["broker"] == "filesystem://"
    assert resolved["layer"] == "InMemoryChannelLayer"
    assert resolved["embedded"] is True
    assert resolved["model_roots"] == [str(tmp_path / "data" / "models")]


def test_it_uses_postgres_and_redis_when_their_urls_are_set(tmp_path):
    resolved = resolve(
        tmp_path,
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/somedb",
        REDIS_URL="redis://127.0.0.1:6379/3",
        ALLOWED_HOSTS="rl.example.org, localhost",
        MODEL_ROOTS=f"{tmp_path}/a{os.pathsep}{tmp_path}/b",
    )
    assert resolved["engine"] == "django.db.backends.postgresql"
    assert resolved["db_name"] == "somedb"
    assert resolved["broker"] == "redis://127.0.0.1:6379/3"
    assert resolved["layer"] == "RedisChannelLayer"
    assert resolved["embedded"] is False
    assert resolved["hosts"] == ["rl.example.org", "localhost"]
    assert resolved["model_roots"] == [f"{tmp_path}/a", f"{tmp_path}/b"]


def test_it_refuses_a_debug_value_that_is_not_a_boolean(tmp_path):
    env = {k: v for k, v in os.environ.items()}
    env.update(DJANGO_SETTINGS_MODULE="rlweb.settings", DATA_DIR=str(tmp_path), DEBUG="maybe")
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in out.stderr


def test_the_web_process_never_imports_torch_or_ray(tmp_path):
    probe = (
        "import sys, django; django.setup();"
        "from django.urls import get_resolver; get_resolver().url_patterns;"
        "import rlweb.asgi, rlweb.routing;"
        "from django.apps import apps; [m for m in apps.get_models()];"
        "import importlib; [importlib.import_module(a.name + '.views') for a in apps.get_app_configs() if a.name.startswith('rlweb.') and importlib.util.find_spec(a.name + '.views')];"
        "print(sorted(m for m in ('torch', 'ray', 'transformers') if m in sys.modules))"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="rlweb.settings", DATA_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
