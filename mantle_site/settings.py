"""One env-driven settings module. Mantle's own knobs come from mantle.yaml (mantle_site.config)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from mantle_site import embedded_db
from mantle_site.config import load_config

BASE_DIR = Path(__file__).resolve().parent.parent
MANTLE = load_config()


def _env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).lower() in {"1", "true", "yes", "on"}


# A link to the database that dies (a partition, a lost host) is found in seconds instead of
# TCP's minutes of retries: a request then answers 503 database_unavailable. libpq's options,
# unless the URL sets its own (a Unix socket ignores them).
TCP_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}


def _database(url: str) -> dict[str, Any]:
    params = {**TCP_DEFAULTS, **conninfo_to_dict(url)}
    return {
        "ENGINE": "mantle_site.postgresql",
        "NAME": params.pop("dbname", "mantle"),
        "USER": params.pop("user", "postgres"),
        "PASSWORD": params.pop("password", ""),
        "HOST": params.pop("host", ""),
        "PORT": params.pop("port", ""),
        # psycopg's default, which Django turns off: a statement run 5 times on a connection
        # through a server-binding cursor (the admission's, executions.sql.prepared_cursor) is
        # prepared there, parsed and planned once.
        "OPTIONS": {"prepare_threshold": 5, **params},
        # Persistent connections: a webhook must not pay for a new PostgreSQL connection. The
        # health check drops a connection the server closed (e.g. after a restart), without a
        # round trip (mantle_site.postgresql).
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"NAME": os.environ.get("MANTLE_TEST_DATABASE")},
    }


DATABASE_URL = MANTLE.database.url or os.environ.get("DATABASE_URL")
USES_EMBEDDED_DB = DATABASE_URL is None
if DATABASE_URL is None and os.environ.get(embedded_db.URL_ENV):
    # A child of `mantle serve`: the embedded server its parent started or adopted.
    DATABASES = {"default": _database(os.environ[embedded_db.URL_ENV])}
elif DATABASE_URL is None:
    # The embedded server's socket directory is known once it runs: its backend starts or
    # adopts it at the first connection of this process and fills in HOST.
    DATABASES = {
        "default": {
            **_database("postgresql://postgres@/" + embedded_db.DATABASE_NAME),
            "ENGINE": "mantle_site.embedded_postgresql",
        }
    }
else:
    DATABASES = {"default": _database(DATABASE_URL)}


def pooled(database: dict[str, Any]) -> dict[str, Any]:
    """`database` through a transaction pooler: no server-side cursors (a WITH HOLD cursor
    outlives the transaction that held its server connection) and no prepared statements (one
    prepared on a server connection is unknown on the next)."""
    options = {**database["OPTIONS"], "prepare_threshold": None}
    return {**database, "DISABLE_SERVER_SIDE_CURSORS": True, "OPTIONS": options}


# The connections a transaction pooler cannot carry (core.locks: LISTEN, the clock's session
# lock) go to `database.direct_url`. Given one, `url` is taken to be pooled.
DIRECT_DATABASE_ALIAS = "default"
if MANTLE.database.direct_url is not None:
    DIRECT_DATABASE_ALIAS = "direct"
    DATABASES["default"] = pooled(DATABASES["default"])
    DATABASES["direct"] = {
        **_database(MANTLE.database.direct_url),
        "TEST": {"MIRROR": "default"},
    }


def _local_secret_key() -> str:
    # Shared by every process on this machine (web workers must agree to read sessions). A
    # command run outside the project shares nothing and leaves no .mantle/ behind.
    path = embedded_db.home() / "secret_key"
    if not path.exists() and not embedded_db.home_may_be_created():
        return secrets.token_urlsafe(50)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or _local_secret_key()
# Where this machine's local state lives: the embedded PostgreSQL, the secret key, the metrics of
# `mantle serve`'s processes, make run's credentials (teams.credentials).
MANTLE_HOME = embedded_db.home()
DEBUG = _env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "*").split(",")
CSRF_TRUSTED_ORIGINS = [
    o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o
]

INSTALLED_APPS = [
    "mantle_site.admin_site.MantleAdminConfig",  # django.contrib.admin, its index grouped
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_q",
    "teams",
    "workflows",
    "executions",
    "engine",
    "api",
    "dashboard",
    "mantle_site",
]

MIDDLEWARE = [
    "api.errors.JsonErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "mantle_site.middleware.BrowserSessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "mantle_site.middleware.BrowserAuthenticationMiddleware",
    "mantle_site.middleware.BrowserMessageMiddleware",
    "mantle_site.middleware.BrowserXFrameOptionsMiddleware",
]

ROOT_URLCONF = "mantle_site.urls"
WSGI_APPLICATION = "mantle_site.wsgi.application"
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
            ]
        },
    }
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
LOGIN_URL = "/admin/login/"

# Request bodies of the API and the webhooks: larger is 413 (api.errors).
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["teams.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["teams.auth.HasTeamKey"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "api.negotiation.JsonFirstNegotiation",
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Mantle API",
    "VERSION": "1",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {"ExecutionStatusEnum": "executions.models.Status"},
}

# django-q2: the cluster that runs the schedules (engine/schedules.py) and tasks queued by the
# previous release. Steps and executions never go through it: the step workers (engine/worker.py)
# claim them from their tables. Nothing here is latency-sensitive, so one worker polls the ORM
# broker once a second. Every task settles its own state, so django-q2 never retries one.
Q_CLUSTER = {
    "name": "mantle",
    "workers": 1,
    "timeout": 3600,
    "retry": 3700,
    "max_attempts": 1,
    "ack_failures": True,
    "catch_up": False,
    "poll": 1.0,
    "queue_limit": 1,
    "save_limit": 200,
    "label": "Django Q2",
    **({"orm": "default"} if MANTLE.engine.broker == "orm" else {"redis": MANTLE.engine.broker}),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("MANTLE_LOG_LEVEL", "WARNING")},
}
