"""StateLab settings, driven by environment variables.

DATABASE_URL  PostgreSQL; unset: the demo's embedded PostgreSQL in STATELAB_DATA_DIR/postgres.
REDIS_URL     Celery broker/result backend; when unset Celery runs tasks eagerly (demo only).
SECRET_KEY, DEBUG, ALLOWED_HOSTS, MEDIA_ROOT, STATELAB_DATA_DIR.
"""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

from protocols.registry import BUILT_IN as BUILT_IN_PROTOCOLS

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("STATELAB_DATA_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DEBUG", False)
# Production (DEBUG off) refuses to start without its own key: the demo's key is public.
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Production (DEBUG=0) needs its own secret key in the environment; "
            "the demo (bash .ci/demo) runs with DEBUG=1 and a public development key."
        )
    SECRET_KEY = "insecure-dev-key-only-for-local-demo"
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

# HTTPS (STATELAB_HTTPS=1 in production, set by docker-compose): secure cookies, HSTS and a
# redirect to https. Behind a TLS-terminating proxy, SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto
# makes Django trust the proxy's header (only set it when the proxy always sets it).
HTTPS = env_bool("STATELAB_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS and env_bool("SECURE_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", HTTPS)
if os.environ.get("SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + os.environ["SECURE_PROXY_SSL_HEADER"].upper().replace("-", "_"), "https")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

INSTALLED_APPS = [
    "config.apps.StateLabAdminConfig",  # django.contrib.admin, open to projects' researchers too
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "annotation",
    "inference",
    "evaluation",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.unavailable.ServiceUnavailableMiddleware",  # 503 + Retry-After while PostgreSQL / Redis are down
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Upload cap (413), body caps, NUL bytes (400), before CSRF reads a body.
    "annotation.input_limits.InputLimitsMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.csp.ContentSecurityPolicyMiddleware",  # Content-Security-Policy on HTML pages (config/csp.py)
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into a 429 page
]

ROOT_URLCONF = "config.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "OPTIONS": {
            # The project's templates/, then each registered protocol's own templates/ folder
            # (config/protocol_assets.py: found from the registry), then the apps' (the admin's).
            "loaders": [
                (
                    "django.template.loaders.cached.Loader",
                    [
                        "django.template.loaders.filesystem.Loader",
                        "config.protocol_assets.ProtocolTemplateLoader",
                        "django.template.loaders.app_directories.Loader",
                    ],
                )
            ],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "annotation.admin_site.admin_link",  # the header's link to the admin, for who may use it
            ],
        },
    },
]
WSGI_APPLICATION = "config.wsgi.application"

_database_url = os.environ.get("DATABASE_URL")
# Without DATABASE_URL: the demo's embedded PostgreSQL, its data here, which `manage.py demo` starts
# and stops (config/demo_database.py). It listens on a Unix socket in that folder.
EMBEDDED_POSTGRES_DIR = None if _database_url else DATA_DIR / "postgres"
if _database_url:
    # Persistent connections (a minute) in the web processes, checked before their first use in
    # each request: after a PostgreSQL restart the check finds the broken connection and opens a
    # new one, instead of the first request of every web worker failing on it (a 503;
    # tests/test_faults.py). Celery workers open a new one for every Celery task (Celery's Django
    # fixup closes them before and after each one).
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)}
    # Django's backend with a health check that polls the connection's socket instead of sending
    # SELECT 1 to PostgreSQL in every request (config/postgresql/base.py says what it sees).
    DATABASES["default"]["ENGINE"] = "config.postgresql"
else:
    DATABASES = {
        "default": {
            "ENGINE": "config.postgresql",
            "NAME": "statelab",
            "USER": "postgres",
            "HOST": str(EMBEDDED_POSTGRES_DIR),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    }
# Server-side prepared statements (Django turns them off by default), planned once: generic
# plans (PostgreSQL would otherwise keep re-planning the task claim, 5 ms, to execute it in
# 0.5 ms). Only cursors with server-side binding prepare; the ORM's client-side cursors never
# do, so in practice this affects only the task queue's hot-path statements
# (annotation/services.py, prepare=True), and the project has no PL/pgSQL. Does not work
# behind a transaction-pooling PgBouncer: set DATABASE_PREPARE=0 there.
if os.environ.get("DATABASE_PREPARE", "1") != "0":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        prepare_threshold=5, options="-c plan_cache_mode=force_generic_plan"
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one username from
# one address, that pair is locked out for AXES_COOLOFF_MINUTES (429); a success resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", 10))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("AXES_COOLOFF_MINUTES", 15)))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_IPWARE_PROXY_COUNT = int(os.environ.get("AXES_PROXY_COUNT", 0)) or None  # proxies in front (X-Forwarded-For)
AXES_IPWARE_META_PRECEDENCE_ORDER = (
    ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"] if AXES_IPWARE_PROXY_COUNT else ["REMOTE_ADDR"]
)
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# static/, the apps' static/ folders, and each registered protocol's own (config/protocol_assets.py).
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "config.protocol_assets.ProtocolStaticFinder",
]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
MEDIA_URL = "/media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", DATA_DIR / "media"))


# Where media files are stored: a Django storage backend chosen by environment.
# MEDIA_STORAGE: the backend's dotted path (default: files under MEDIA_ROOT, served at MEDIA_URL);
# MEDIA_STORAGE_OPTIONS: a JSON object of its options. The default gets no options on purpose,
# so it follows MEDIA_ROOT (also when tests change it). For S3-compatible object storage (MinIO,
# AWS, …): MEDIA_STORAGE=storages.backends.s3.S3Storage and options such as
# {"bucket_name": "statelab", "endpoint_url": "http://minio:9000", "access_key": …, "secret_key": …}
# (or the AWS_* environment variables django-storages reads). Then /media/ answers a permitted
# request with a redirect to a presigned URL valid MEDIA_SIGNED_URL_SECONDS, signed for
# MEDIA_STORAGE_PUBLIC_ENDPOINT when browsers reach the bucket by another address than the
# servers do, and workers copy media into CACHE_ROOT (config/storage.py).
def _storage_options(name: str) -> dict:
    import json

    raw = os.environ.get(name) or "{}"
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a JSON object of storage options: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object of storage options, not {raw!r}")
    return value


STORAGES = {
    "default": {
        "BACKEND": os.environ.get("MEDIA_STORAGE") or "django.core.files.storage.FileSystemStorage",
        "OPTIONS": _storage_options("MEDIA_STORAGE_OPTIONS"),
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
MEDIA_STORAGE_PUBLIC_ENDPOINT = os.environ.get("MEDIA_STORAGE_PUBLIC_ENDPOINT", "")
MEDIA_SIGNED_URL_SECONDS = int(os.environ.get("MEDIA_SIGNED_URL_SECONDS", 900))
# Where frame caches and temporary import files live.
CACHE_ROOT = Path(os.environ.get("STATELAB_CACHE_ROOT", DATA_DIR / "cache"))
# Media referenced by a bare JSONL uploaded through the API or page are looked up here
# (a zip upload carries its own media). Unset: MEDIA_ROOT/incoming.
IMPORT_MEDIA_ROOT = os.environ.get("IMPORT_MEDIA_ROOT") or None
# The benchmark protocols, one package each (protocols/base.py describes the interface): the
# built-in ones are listed once, in protocols/registry.py; a deployment adds its own here, e.g.
# STATELAB_PROTOCOLS = [*BUILT_IN_PROTOCOLS, "mylab.protocols.tidiness"].
STATELAB_PROTOCOLS = list(BUILT_IN_PROTOCOLS)
# The scorer inference's results.json asks for (inference never imports evaluation itself).
STATELAB_JOB_METRICS = "evaluation.leaderboard.job_metrics"
# Tasks sent by name, with (project_id, release_id), once an inference job ends FINISHED: the
# evaluation app pre-computes the job's boards (again without inference importing evaluation).
STATELAB_JOB_FINISHED_TASKS = ["evaluation.tasks.warm_boards"]
IMPORT_MAX_IMAGE_PIXELS = int(os.environ.get("IMPORT_MAX_IMAGE_PIXELS", 64_000_000))
IMPORT_MAX_FILE_BYTES = int(os.environ.get("IMPORT_MAX_FILE_BYTES", 2 * 1024**3))
# Environment variables an endpoint may name as its API key (inference/backends/keys.py): these
# names, and names starting with the prefix; Django's and StateLab's own secrets never.
STATELAB_ENDPOINT_KEY_VARS = tuple(
    v.strip() for v in os.environ.get("STATELAB_ENDPOINT_KEY_VARS", "OPENAI_API_KEY").split(",") if v.strip()
)
STATELAB_ENDPOINT_KEY_PREFIX = os.environ.get("STATELAB_ENDPOINT_KEY_PREFIX", "STATELAB_KEY_")
# Bodies that are not uploads (JSON, forms) are read into memory: 413 above this (annotation/input_limits.py).
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Uploads stream to temporary files on disk, never into memory, and stop past the cap (413).
FILE_UPLOAD_HANDLERS = ["annotation.input_limits.CappedUploadHandler"]
STATELAB_MAX_UPLOAD_BYTES = int(os.environ.get("STATELAB_MAX_UPLOAD_BYTES", 2 * 1024**3))
# Imports: the longest JSONL line read (in bounded chunks, never whole) and the total uncompressed
# size a zip's central directory may declare (refused before anything is extracted).
STATELAB_MAX_LINE_BYTES = int(os.environ.get("STATELAB_MAX_LINE_BYTES", 1024**2))
STATELAB_MAX_ZIP_BYTES = int(os.environ.get("STATELAB_MAX_ZIP_BYTES", 16 * 1024**3))

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# API tokens (annotation/tokens.py): a lifetime in hours, 30 days unless set (0: they never expire;
# signing out, in the app or the admin, and `manage.py revoke_tokens` revoke them too), and wrong
# tokens allowed per client address per window before that address gets 429 for the rest of the window.
STATELAB_TOKEN_TTL_HOURS = float(os.environ.get("STATELAB_TOKEN_TTL_HOURS") or 720) or None
# /healthz (config/health.py) names hosts, queues' workers and error classes only to staff or to a
# caller sending this token (header X-Health-Token); anyone else gets the verdict and the counts.
STATELAB_HEALTH_TOKEN = os.environ.get("STATELAB_HEALTH_TOKEN", "")
STATELAB_BAD_TOKEN_LIMIT = int(os.environ.get("STATELAB_BAD_TOKEN_LIMIT", 20))
STATELAB_BAD_TOKEN_WINDOW_SECONDS = int(os.environ.get("STATELAB_BAD_TOKEN_WINDOW_SECONDS", 60))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        # DRF's TokenAuthentication with its query compiled once per process (same checks).
        "annotation.permissions.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    # JSON bodies holding a NUL byte are refused with 400 (PostgreSQL cannot store one).
    "DEFAULT_PARSER_CLASSES": [
        "annotation.input_limits.NulFreeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "StateLab API",
    "DESCRIPTION": "Annotation, releases, inference and analysis for object-state benchmarks.",
    "VERSION": "0.1.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,
    # One schema enum for a project role wherever a field takes one (members, invites, overview).
    "ENUM_NAME_OVERRIDES": {"ProjectRoleEnum": "annotation.models.Role"},
}

# Celery: a real broker when REDIS_URL is set; eager execution only for the demo without Redis.
REDIS_URL = os.environ.get("REDIS_URL", "")
# Computed leaderboards and correlation reports are cached under a fingerprint of their data, in
# Redis when there is one, so every web process and the workers that pre-compute them share it.
if REDIS_URL:
    # Bounded waits: a Redis that does not answer (rather than refusing) gives a 503 within
    # seconds instead of holding a web worker until gunicorn's timeout.
    CACHES = {
        "default": {
            "BACKEND": "config.cache.RedisCache",  # Django's, one client per pool (config/cache.py)
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "statelab",
            "OPTIONS": {"socket_connect_timeout": 3, "socket_timeout": 5},
        }
    }
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = False
else:
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"
    CELERY_TASK_ALWAYS_EAGER = True
    CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "inference.tasks.run_api_chunk": {"queue": "api"},
    "inference.tasks.run_gpu_chunk": {"queue": "gpu"},
}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", 3600))}


def _refusal_without_traceback(record) -> bool:
    """A refused request (a 4xx: a 403 for a page the role may not open, a 404) is an answer, not a
    fault: its line is logged, its traceback is not. 5xx records keep theirs."""
    status = getattr(record, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500:
        record.exc_info = None
        record.exc_text = None
    return True


LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "refusal_without_traceback": {
            "()": "django.utils.log.CallbackFilter",
            "callback": _refusal_without_traceback,
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"filters": ["refusal_without_traceback"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}

# Serve /static/ straight from the app folders when collectstatic has not run (demo, tests).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="No directory at")

# Tracked background runs (job starts and chunks, exports, board warm-ups, imports): the worker
# refreshes a run's heartbeat every STATELAB_RUN_HEARTBEAT_SECONDS; the watchdog (beat, every
# STATELAB_WATCHDOG_SECONDS) re-queues a run whose heartbeat is older than STATELAB_RUN_LAPSE_SECONDS,
# up to STATELAB_RUN_MAX_ATTEMPTS claims, then fails it with the reason. The broker's visibility
# timeout stays long (a long chunk is never delivered twice by Redis); recovery is the watchdog's.
STATELAB_RUN_HEARTBEAT_SECONDS = float(os.environ.get("STATELAB_RUN_HEARTBEAT_SECONDS", 10))
STATELAB_RUN_LAPSE_SECONDS = float(os.environ.get("STATELAB_RUN_LAPSE_SECONDS", 45))
STATELAB_RUN_MAX_ATTEMPTS = int(os.environ.get("STATELAB_RUN_MAX_ATTEMPTS", 3))
# A queued run whose message was sent this long ago and that is missing from its broker queue and
# not held by a worker (unacked: a retry waiting out its countdown) delivered or due within this
# long is sent again (a message lost with the broker, or held by a worker that lost its broker
# connection); a duplicate finds nothing to claim.
STATELAB_RUN_RESEND_SECONDS = float(os.environ.get("STATELAB_RUN_RESEND_SECONDS", 60))
STATELAB_WATCHDOG_SECONDS = float(os.environ.get("STATELAB_WATCHDOG_SECONDS", 15))
# The one background-run machinery (background/) names no app; these wire the apps' runs into it:
# the table whose id a tracked Celery task's message carries, what a run failed for good tells its owner,
# and each table's watchdog pass (label: its counts' prefix in the watchdog's result).
STATELAB_TRACKED_RUN_MODEL = "inference.BackgroundRun"
STATELAB_TRACKED_RUN_FAILED = "inference.services.recovery.run_settle_job"
STATELAB_RUN_WATCHERS = {
    "runs": "inference.services.recovery.runs_watch",
    "imports": "annotation.importing.runs.import_runs_watch",
}
# Workers report themselves per queue in Redis (config/workers.py) every few seconds, with a TTL.
STATELAB_WORKER_HEARTBEAT_SECONDS = float(os.environ.get("STATELAB_WORKER_HEARTBEAT_SECONDS", 10))
STATELAB_WORKER_TTL_SECONDS = int(os.environ.get("STATELAB_WORKER_TTL_SECONDS", 30))

# Periodic work (run by the `beat` service): give the items of tasks whose lease ran out back to
# the queue (annotation.tasks.expire_task_leases); re-queue or fail background runs whose worker
# died (inference.tasks.watch_runs). Both keep the Celery task names the schedule has always sent.
CELERY_BEAT_SCHEDULE = {
    "expire-task-leases": {"task": "annotation.tasks.expire_task_leases", "schedule": 60.0},
    "watch-runs": {
        "task": "inference.tasks.watch_runs",
        "schedule": STATELAB_WATCHDOG_SECONDS,
        "options": {"expires": STATELAB_WATCHDOG_SECONDS},
    },  # no pile-up while no worker runs
}
