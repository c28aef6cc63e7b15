"""Settings, read from the environment (see README "Configuration").

Two modes, chosen by what is set:
- embedded (nothing set): SQLite under DATA_DIR, Celery over kombu's filesystem transport,
  an in-memory channel layer (live pages poll the database once a second);
- production (DATABASE_URL and REDIS_URL): Postgres through psycopg 3, Redis for the Celery
  broker and the Channels layer.
"""

from pathlib import Path

import dj_database_url

from rlweb.env import env_bool, env_int, env_list, env_paths, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
DATA_DIR = Path(env_str("DATA_DIR", str(BASE_DIR / "var"))).expanduser().resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _local_secret_key(path: Path) -> str:
    # Embedded/demo mode: a random key kept beside the data, so sessions survive restarts and
    # no secret ships with the code. Production sets SECRET_KEY.
    if not path.exists():
        import secrets

        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env_str("SECRET_KEY") or _local_secret_key(DATA_DIR / "secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Models load only from under these directories (or the builtin tiny model).
MODEL_ROOTS = env_paths("MODEL_ROOTS", [DATA_DIR / "models"])
# Server-side dataset directories (Hugging Face save_to_disk) may be imported only from under these.
DATASET_ROOTS = env_paths("DATASET_ROOTS", [DATA_DIR / "datasets"])
RAY_ADDRESS = env_str("RAY_ADDRESS", "")
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 2 * 1024**3)

DATABASE_URL = env_str("DATABASE_URL")
REDIS_URL = env_str("REDIS_URL")
EMBEDDED = not (DATABASE_URL and REDIS_URL)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "rlweb.core",
    "rlweb.datasets",
    "rlweb.judgers",
    "rlweb.runs",
    "rlweb.review",
    "rlweb.api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every view needs a login unless it is explicitly marked @login_not_required: a new page
    # cannot be left open by forgetting a decorator.
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "rlweb.urls"
WSGI_APPLICATION = "rlweb.wsgi.application"
ASGI_APPLICATION = "rlweb.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "rlweb.core.context.site",
            ],
        },
    },
]

if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60), conn_health_checks=True)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "rlweb.sqlite3",
            "OPTIONS": {
                # Web and worker write concurrently: wait for locks instead of failing, and take
                # the write lock up front so two writers cannot deadlock on an upgrade.
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on a missing root before collectstatic


def _plotly_js_dir() -> Path:
    # plotly.js is served from the installed plotly package: no CDN, nothing from the internet.
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data"


STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", _plotly_js_dir())]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True  # serve straight from the finders in dev/tests, no collectstatic needed
MEDIA_ROOT = DATA_DIR / "media"
FILE_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024**2  # larger uploads stream to a temp file
DATA_UPLOAD_MAX_MEMORY_SIZE = 16 * 1024**2

# --- Celery -----------------------------------------------------------------------------
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 7 * 24 * 3600}
else:
    _broker_dir = DATA_DIR / "broker"
    for sub in ("queue", "processed", "control"):
        (_broker_dir / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        # Broadcast (pidbox) exchanges; kombu's default is ./control in the working directory.
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
CELERY_TASK_IGNORE_RESULT = True  # the database is the source of truth for run state
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULE = {
    "reap-lost-runs": {"task": "workers.tasks.reap_lost_runs", "schedule": 15.0},
}
# A run whose heartbeat is older than this is marked lost.
RUN_HEARTBEAT_SECONDS = env_int("RUN_HEARTBEAT_SECONDS", 5)
RUN_LOST_AFTER_SECONDS = env_int("RUN_LOST_AFTER_SECONDS", 45)

# --- Channels ---------------------------------------------------------------------------
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# Live consumers re-read the database this often even without a notification (embedded mode
# has no cross-process layer; with Redis it is a safety net).
LIVE_POLL_SECONDS = float(env_str("LIVE_POLL_SECONDS", "1.0" if EMBEDDED else "5.0"))

# --- REST API ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": env_str("API_THROTTLE_USER", "6000/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "rlweb admin API",
    "DESCRIPTION": "Runs, datasets, judgers, metric series and samples of the rlweb RL service.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and docs describe private endpoints: signed-in users only.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Several models have a "status", "split" or "kind" with different choices: name each set
    # (imported lazily, when the schema is built: the choices' one source of truth).
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "rlweb.runs.models.Run.Status",
        "SplitEnum": "rlweb.runs.models.Trajectory.Split",
        "JudgerKindEnum": "workers.rl.judgers.spec.SPEC_BY_KIND",
    },
}

# --- Logging ----------------------------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOG_FORMAT = env_str("LOG_FORMAT", "text")  # "json" for one JSON object per line
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "rlweb.logging.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.server": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
    },
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads it to send X-CSRFToken
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
