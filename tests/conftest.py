"""Shared fixtures: people, projects, a real Chromium for browser tests.

Tests run against the PostgreSQL that DATABASE_URL names; .ci/test sets it. A run without it is
refused here: it would go to the demo's embedded PostgreSQL (config/demo_database.py).
"""

from __future__ import annotations

import os
import shutil

import pytest
from django.conf import settings

# Fixtures shared by several folders: a real Redis broker for worker tests, a real S3-protocol
# server (moto) with a fresh bucket for the storage tests, and the fault tests' private stack.
pytest_plugins = ["tests.inference.worker", "tests.s3_server", "tests.helpers.fault_stack"]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def pytest_configure(config):
    if settings.EMBEDDED_POSTGRES_DIR is not None:
        raise pytest.UsageError("Tests run against PostgreSQL: set DATABASE_URL (bash .ci/test does).")


@pytest.fixture(autouse=True)
def _media_root(tmp_path, settings):
    # Fast hashing: password hashing otherwise dominates tests that create users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CACHE_ROOT = tmp_path / "cache"
    settings.MEDIA_ROOT.mkdir()
    return settings.MEDIA_ROOT


@pytest.fixture
def make_user(db):
    from django.contrib.auth import get_user_model

    User = get_user_model()
    counter = {"n": 0}

    def make(username: str | None = None, *, password: str = "pw", superuser: bool = False):
        counter["n"] += 1
        name = username or f"user{counter['n']}"
        if superuser:
            return User.objects.create_superuser(name, f"{name}@example.org", password)
        return User.objects.create_user(name, f"{name}@example.org", password)

    return make


@pytest.fixture
def make_project(db):
    from annotation.models import Membership, Project

    def make(slug: str = "p1", protocol: str = "status", *, members: dict | None = None, **fields):
        project = Project.objects.create(slug=slug, name=fields.pop("name", slug), protocol=protocol, **fields)
        for user, role in (members or {}).items():
            Membership.objects.create(project=project, user=user, role=role)
        return project

    return make


@pytest.fixture
def eager(settings):
    """Run Celery tasks in the calling process (as the demo does without Redis). Tests of real
    queueing start a worker instead (tests/inference/worker.py)."""
    from config.celery import app

    before = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.CELERY_TASK_EAGER_PROPAGATES = True
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield app
    app.conf.task_always_eager, app.conf.task_eager_propagates = before


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    yield pg
    # A route handler may still be fetching a request the page sent as the test ended (the
    # preloaded next task, say). Drop the handlers and swallow their late errors first, or one
    # of them surfaces in whatever Playwright call the next test makes.
    for owner in (*context.pages, context):
        owner.unroute_all(behavior="ignoreErrors")
    context.close()


@pytest.fixture
def login(live_server):
    """Log a Playwright page in through the real login form."""

    def do(page, username: str, password: str = "pw"):
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/**")
        return page

    return do


def pytest_collection_modifyitems(config, items):
    """A test that drives Chromium is a browser test whether or not it says so, so the fast lane
    (`bash .ci/test --fast`: no browser, worker or slow tests) never starts a browser."""
    for item in items:
        if {"browser", "page"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
