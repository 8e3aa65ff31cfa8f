"""Browser (Debian Chromium via Playwright): a researcher uploads a file, a real Celery worker
imports it while the run's page follows it, sees a refusal listed by line and field, imports a
zip, freezes a release and finds it listed with its downloads; the project page shows the counts."""

from __future__ import annotations

import json
import zipfile

import pytest

from annotation.importing.samples import write_sample_dataset
from annotation.models import ImportRun, Item, Release, Role
from tests.browser.work_helpers import shot
from tests.helpers.browser import wait_import_done
from tests.inference.worker import start_worker, stop_worker

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def worker(broker, tmp_path):
    process = start_worker("imports", tmp_path / "worker.log")
    yield process
    stop_worker(process)


def test_researcher_imports_and_freezes_in_the_browser(
    page, live_server, login, make_user, make_project, tmp_path, worker
):
    researcher = make_user("res")
    make_project("web", "status", members={researcher: Role.RESEARCHER})
    data = tmp_path / "data"
    items = write_sample_dataset(data, "status", 4)
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as zf:
        zf.write(items, "items.jsonl")
        for p in (data / "img").iterdir():
            zf.write(p, f"img/{p.name}")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "image_a": "/etc/passwd", "image_b": "img/s0_b.png"}) + "\n")

    login(page, "res")
    page.goto(f"{live_server.url}/projects/web/import/")
    page.set_input_files("#id_file", str(bad))
    page.click("#import-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/projects/web/imports/*/")
    assert wait_import_done(page) == "refused"
    errors = page.locator("#import-errors li").all_inner_texts()
    assert errors == [
        "line 1: field image_a: /etc/passwd: absolute paths are refused; give a path relative to the media root",
        "line 1: field image_b: img/s0_b.png: file not found under the media root",
    ]
    assert Item.objects.count() == 0

    page.goto(f"{live_server.url}/projects/web/import/")
    page.set_input_files("#id_file", str(good))
    page.check("#id_verified")
    page.click("#import-form button[type=submit]")
    assert wait_import_done(page) == "finished"
    assert page.locator("#created").inner_text() == "4"
    shot(page, "import_run")
    assert Item.objects.filter(project__slug="web", status="verified").count() == 4
    assert [r.status for r in ImportRun.objects.order_by("pk")] == ["refused", "finished"]
    page.goto(f"{live_server.url}/projects/web/import/")
    assert page.locator("#import-runs tr[data-run]").count() == 2
    shot(page, "import")

    page.goto(f"{live_server.url}/projects/web/releases/")
    page.fill("#id_version", "v1")
    page.click("#freeze-form button[type=submit]")
    row = page.locator('#release-list tr[data-version="v1"]')
    assert row.locator("td").nth(2).inner_text() == "4"
    assert Release.objects.get(project__slug="web", version="v1").item_count == 4
    with page.expect_download() as download:
        row.locator("a", has_text="jsonl").click()
    lines = open(download.value.path(), encoding="utf-8").read().splitlines()
    assert json.loads(lines[0])["release"]["item_count"] == 4 and len(lines) == 5

    page.goto(f"{live_server.url}/projects/web/")
    assert page.locator("#total-items").inner_text() == "4"
    assert page.locator("#my-role").inner_text() == "researcher"
