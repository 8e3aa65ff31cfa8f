"""Real media files and items for the browser tests of the annotator and reviewer pages.

Media are made on the spot (Pillow PNGs, a 1-second ffmpeg test pattern) and stored through
annotation/media/assets.py exactly as an import stores them, so the pages load real files over HTTP.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from django.conf import settings
from django.urls import resolve
from PIL import Image, ImageDraw

from annotation.media.assets import assets_store, inspect_media
from annotation.models import Item

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def served_media_root() -> Path:
    """The folder /media/ is really served from.

    config/urls.py binds `document_root` when the URLconf is first imported, so after the first
    test in a process it no longer follows the per-test MEDIA_ROOT; store files where it looks.
    """
    match = resolve("/media/probe.png")
    return Path(match.kwargs.get("document_root") or settings.MEDIA_ROOT)


def png(path: Path, *, color: tuple[int, int, int], size=(320, 240), mark: str = "", shape=None) -> Path:
    img = Image.new("RGB", size, color)
    draw = ImageDraw.Draw(img)
    if shape:
        draw.rectangle(shape, fill=(250, 250, 250), outline=(20, 20, 20), width=3)
    if mark:
        draw.text((10, 10), mark, fill=(0, 0, 0))
    img.save(path, "PNG")
    return path


def mp4(path: Path, *, seconds: float = 1.0, pattern: str = "testsrc") -> Path:
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            f"{pattern}=duration={seconds}:size=160x120:rate=10",
            "-pix_fmt",
            "yuv420p",
            "-c:v",
            "libx264",
            "-movflags",
            "+faststart",
            str(path),
        ],
        check=True,
        timeout=60,
    )
    return path


def store(path: Path, kind: str) -> str:
    """Validate and store one file as a MediaAsset; return its sha256."""
    info = inspect_media(path, kind)
    assets_store(media=[(info, str(path))], open_file=lambda source: open(source, "rb"), written=[])
    return info.sha256


def make_item(project, external_id: str, payload: dict, media: dict) -> Item:
    return Item.objects.create(project=project, external_id=external_id, payload=payload, media=media)


def capture_api(page, into: list):
    """Record every /api/ response body the page receives (to check what reached the browser).

    The requests go through Playwright's router, which fetches them itself, so each body is
    kept even when the page navigates away before reading it.
    """

    def on_route(route):
        response = route.fetch()
        into.append((route.request.url, response.status, response.text()))
        route.fulfill(response=response)

    page.route("**/api/**", on_route)
    page.statelab_api_log = into  # read by wait_task to explain a timeout


def page_state(page) -> str:
    """What the workbench shows right now, and the last API answers it had: for failure messages."""
    try:
        state = page.evaluate(
            """() => ({
                 task: (document.querySelector('[data-workbench]') || {dataset: {}}).dataset.task || null,
                 status: (document.querySelector('[data-save-status]') || {}).textContent || null,
                 notices: [...document.querySelectorAll('[data-notices] li')].map(li => li.textContent.trim()),
                 empty: !!document.querySelector('[data-queue-empty]'),
               })"""
        )
    except Exception as exc:  # the page itself may be gone
        state = f"(page unreadable: {exc})"
    log = getattr(page, "statelab_api_log", None) or []
    last = [(url.split("/api/", 1)[-1], status, body[:200]) for url, status, body in log[-4:]]
    return f"page {page.url}: {state}; last API answers: {last}"


def wait_task(page, previous: str | None = None, timeout: float = 15_000) -> str:
    """Wait until the workbench shows a task (different from `previous`); return its id."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            (
                "prev => { const r = document.querySelector('[data-workbench]'); "
                "return r && r.dataset.task && r.dataset.task !== prev; }"
            ),
            arg=previous or "",
            timeout=timeout,
        )
    except PlaywrightTimeout as exc:
        raise AssertionError(f"no new task after {timeout / 1000:.0f} s; {page_state(page)}") from exc
    return page.eval_on_selector("[data-workbench]", "r => r.dataset.task")


def wait_saved(page, timeout: float = 10_000) -> None:
    page.wait_for_function(
        "() => document.querySelector('[data-save-status]').textContent === 'Saved'", timeout=timeout
    )


def shot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(target), full_page=False)
    return target


def js(value) -> str:
    return json.dumps(value)


def annotate_through_queue(project, user, results: list[dict]) -> list[int]:
    """Claim and submit through the real services, one result per claimed task, the n-th submitted
    4 + n seconds after its claim (the server measures the time: tests/helpers/timed.py); returns
    item ids."""
    from tests.helpers.timed import claim_and_submit

    done = []
    for result in results:
        submitted = claim_and_submit(project, user, result, ms=4000 + 1000 * len(done))
        done.append(submitted.annotation.item_id)
    return done
