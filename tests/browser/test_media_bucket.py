"""Media on object storage, in Chromium: the annotate pages show images and play video that /media/
redirects to presigned URLs on the bucket (moto's S3 server on its own loopback port, so another
origin than the app, as MinIO or S3 are). Browsers check a redirect's target against the page's
Content-Security-Policy, so this fails unless the policy allows the bucket's origin
(config/csp.py: page_header)."""

from urllib.parse import urlsplit

import pytest

from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import Role
from tests.helpers.browser import RECORD_VIOLATIONS
from tests.s3_server import zipped

from .work_helpers import wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def in_bucket(bucket, make_user, make_project, tmp_path):
    """Image pairs (STATUS) and generated videos (OSCBench) imported into the bucket, to annotate."""
    ann = make_user("ann")
    pairs = make_project("pairs", "status", members={ann: Role.ANNOTATOR})
    videos = make_project("clips", "oscbench", members={ann: Role.ANNOTATOR})
    write_sample_dataset(tmp_path / "pairs", "status", 2, distinct=2, complete=False)
    write_sample_dataset(tmp_path / "clips", "oscbench", 2, distinct=1, complete=False)
    items_import(project=pairs, path=zipped(tmp_path / "pairs", tmp_path / "pairs.zip"))
    items_import(project=videos, path=zipped(tmp_path / "clips", tmp_path / "clips.zip"))
    assert bucket["objects"]()  # the media are in the bucket
    return bucket


def _open(page, login, live_server, slug):
    page.add_init_script(RECORD_VIOLATIONS)
    login(page, "ann")
    redirects = []
    page.on(
        "response",
        lambda r: redirects.append(r.headers.get("location")) if r.status == 302 and "/media/" in r.url else None,
    )
    page.goto(f"{live_server.url}/projects/{slug}/annotate/")
    wait_task(page)
    return redirects


def test_images_from_the_bucket_show_on_the_annotate_page(page, login, live_server, in_bucket, s3_endpoint):
    redirects = _open(page, login, live_server, "pairs")
    page.wait_for_function("""() => {
        const imgs = [...document.querySelectorAll("main img")];
        return imgs.length >= 2 && imgs.every((i) => i.complete && i.naturalWidth > 0);
    }""")
    # They came through /media/'s redirect, from the bucket's origin, and nothing was blocked.
    assert redirects and all(urlsplit(u).netloc == urlsplit(s3_endpoint).netloc for u in redirects)
    assert urlsplit(live_server.url).netloc != urlsplit(s3_endpoint).netloc
    assert page.evaluate("window.cspViolations") == []
    policy = page.evaluate("async () => (await fetch(location.href)).headers.get('content-security-policy')")
    assert f"img-src 'self' data: blob: {s3_endpoint};" in policy and f"media-src 'self' blob: {s3_endpoint};" in policy


def test_a_video_from_the_bucket_plays_and_seeks_on_the_rating_page(page, login, live_server, in_bucket):
    _open(page, login, live_server, "clips")
    page.wait_for_function("""() => {
        const v = document.querySelector("main video");
        return v && v.readyState >= 2 && v.duration > 0;
    }""")
    # Seeking asks the bucket for a byte range; the frame there decodes.
    page.evaluate("""() => { const v = document.querySelector("main video"); v.currentTime = v.duration / 2; }""")
    page.wait_for_function(
        """() => { const v = document.querySelector("main video"); return !v.seeking && v.readyState >= 2; }"""
    )
    assert page.evaluate("window.cspViolations") == []
