"""Content-Security-Policy (config/csp.py) in Chromium: every page a person uses carries the
header and runs under it without a single violation (no inline script or style is left in the
templates, the admin or the API docs), and a script injected into a page is refused."""

import json

import pytest

from annotation.members import invite_create
from annotation.models import ImportRun, Role
from inference.models import InferenceJob
from inference.services import predictions_import
from protocols.oscbench import CRITERIA
from tests.evaluation.factories import make_release, rate
from tests.helpers.browser import RECORD_VIOLATIONS
from tests.helpers.items import osc_payload, status_payload

from .work_helpers import annotate_through_queue, make_item, png, served_media_root, store

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(settings, make_user, make_project, tmp_path):
    """A superuser (admin everywhere) and projects with something on every page."""
    settings.MEDIA_ROOT = served_media_root()
    root = make_user("root", superuser=True)
    u1, u2 = make_user("ua"), make_user("ub")
    boxes = make_project("boxes", "changeit", members={u1: Role.ANNOTATOR, u2: Role.ANNOTATOR}, annotations_per_item=2)
    sha = store(png(tmp_path / "apple.png", color=(90, 140, 90)), "image")
    payload = {"image": "apple.png", "object": "apple", "state": "peeled apple", "distractors": ["whole apple"]}
    for i in range(4):  # (the fourth: root's annotate page still has a task after root's own submission)
        make_item(boxes, f"a{i}", payload, {"image": sha})
    # Two items annotated twice (the review page draws both boxes, the agreement page its bars).
    done = annotate_through_queue(boxes, u1, [{"bbox": [10, 10, 100, 100], "state": "peeled apple"}] * 2)
    annotate_through_queue(boxes, u2, [{"bbox": [20, 5, 90, 120], "state": "peeled apple"}] * 2)
    # root's own submission of the third item (its amend page) and an invite link (its page).
    (own_item,) = annotate_through_queue(boxes, root, [{"bbox": [30, 30, 60, 60], "state": "peeled apple"}])
    _, invite_token = invite_create(project=boxes, actor=root, role="annotator", hours=24)
    run = ImportRun.objects.create(
        project=boxes, created_by=root, file_name="items.jsonl", status="finished", report={"created": 3}
    )

    status = make_project("stb", "status")
    release = make_release(status, {f"it{i}": status_payload(i) for i in range(4)})
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    lines = [json.dumps({"item": e, "query": q, "answer": r[q]["answer"]}) for e, r in resolved.items() for q in r]
    predictions_import(project=status, lines=lines, model_name="oracle", release=release)
    job = InferenceJob.objects.create(
        model_name="oracle",
        project=status,
        release=release,
        protocol="status",
        status="finished",
        total_queries=10,
        done_queries=10,
        created_by=root,
    )

    osc = make_project("oscb", "oscbench")
    make_release(osc, {f"gen{i}": osc_payload("gen", i, "regular") for i in range(3)})
    for i, level in enumerate((5, 3, 1)):
        for rater in ("r1", "r2"):
            rate(f"gen{i}", osc, rater, {c: level for c in CRITERIA})
    judge = [
        json.dumps({"item": f"gen{i}", "query": "judge", "answer": {c: 5 - i for c in CRITERIA}}) for i in range(3)
    ]
    predictions_import(project=osc, lines=judge, model_name="judge-x", release=osc.releases.get())
    # A crowd study with one participant (its table and its public link).
    from annotation.studies.participants import PlatformIds, participant_join
    from annotation.studies.setup import study_create

    study = study_create(
        project=boxes,
        actor=root,
        name="Pilot",
        max_participants=5,
        tasks_per_participant=2,
        completion_code="CODE1",
        return_url="https://app.prolific.com/submissions/complete?cc={code}",
    )
    participant_join(study=study, ids=PlatformIds("PID1", "S1", "X1"))
    return {
        "run": run.pk,
        "job": job.pk,
        "item": done[0],
        "project": boxes.pk,
        "invite": invite_token,
        "own": boxes.items.get(pk=own_item).annotations.get().pk,
        "study": study.pk,
        "study_token": study.token,
    }


def pages(world):
    """(path, a selector that shows the page's modules ran) for every page a person uses."""
    return [
        ("/", "main"),
        ("/projects/boxes/", "main"),
        ("/projects/boxes/import/", "main"),
        (f"/projects/boxes/imports/{world['run']}/", "#import-run"),
        ("/projects/boxes/releases/", "main"),
        ("/projects/boxes/annotate/", "[data-workbench][data-task] canvas"),
        ("/projects/boxes/review/", "tr[data-item]"),
        (f"/projects/boxes/review/{world['item']}/", "table.compare"),
        ("/projects/boxes/agreement/", "[data-agreement][data-loaded]"),
        ("/projects/boxes/audit/", "#audit-events"),
        ("/projects/new/", "#project-form"),
        ("/projects/boxes/members/", "#members"),
        ("/projects/boxes/studies/", "#study-new"),
        (f"/projects/boxes/studies/{world['study']}/", "#participants"),
        (f"/study/{world['study_token']}/", "#study-entry"),
        (f"/invites/{world['invite']}/", "#invite-join"),
        (f"/projects/boxes/my-work/{world['own']}/", "[data-workbench][data-task] canvas"),
        ("/projects/stb/leaderboard/", "th.sortable[tabindex='0']"),
        ("/projects/oscb/correlation/", "th.sortable[tabindex='0']"),
        ("/projects/oscb/leaderboard/", "th.sortable[tabindex='0']"),
        (f"/jobs/{world['job']}/", "#job-status"),
        ("/admin/", "#content"),
        ("/admin/inference/inferencejob/", "#result_list"),
        ("/admin/inference/inferencejob/add/", "#id_project"),
        ("/admin/annotation/project/", "#result_list"),
        (f"/admin/annotation/project/{world['project']}/change/", "#project_form"),
        ("/api/projects/", ".response-info"),  # DRF's browsable API
        ("/api/docs/", ".swagger-ui .information-container"),
        ("/api/redoc/", "[role=search], .api-content"),
    ]


def visit(page, url, ready, console):
    """Open a page, let its modules run; return the response and every CSP complaint it caused."""
    console.clear()
    response = page.goto(url)
    page.wait_for_selector(ready)
    page.wait_for_load_state("networkidle")
    return response, [*console, *page.evaluate("window.cspViolations")]


def test_every_page_runs_under_the_policy(page, login, live_server, world):
    page.add_init_script(RECORD_VIOLATIONS)
    console = []
    page.on("console", lambda m: "Content Security Policy" in m.text and console.append(m.text))
    response, problems = visit(page, f"{live_server.url}/accounts/login/", "#id_username", console)
    assert "script-src 'self';" in response.headers["content-security-policy"]
    assert problems == []
    login(page, "root")
    for path, ready in pages(world):
        response, problems = visit(page, f"{live_server.url}{path}", ready, console)
        assert response.status == 200, path
        policy = response.headers.get("content-security-policy", "")
        assert "object-src 'none'" in policy and "frame-ancestors 'none'" in policy, path
        assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0], path
        assert "'unsafe-eval'" not in policy, path
        assert problems == [], (path, problems)

    # The leaderboard's filters apply on change (a handler in leaderboard.js, not an onchange attribute).
    visit(page, f"{live_server.url}/projects/stb/leaderboard/", "select[name=release]", console)
    with page.expect_navigation():
        page.select_option("select[name=release]", "v1")
    assert page.url.endswith("/projects/stb/leaderboard/?release=v1")
    assert [*console, *page.evaluate("window.cspViolations")] == []


def test_the_admin_job_change_page_runs_under_the_policy(page, login, live_server, world):
    page.add_init_script(RECORD_VIOLATIONS)
    console = []
    page.on("console", lambda m: "Content Security Policy" in m.text and console.append(m.text))
    login(page, "root")
    response, problems = visit(
        page, f"{live_server.url}/admin/inference/inferencejob/{world['job']}/change/", "#content", console
    )
    assert response.status == 200
    assert "object-src 'none'" in response.headers.get("content-security-policy", "")
    assert problems == []


def test_the_policy_of_each_kind_of_page(client, world, make_user, settings):
    """Our pages allow scripts from files only; the docs pages allow their own inline blocks by hash."""
    client.force_login(make_user("someone", superuser=True))
    pages_policy = client.get("/projects/boxes/annotate/")["Content-Security-Policy"]
    assert pages_policy == (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "media-src 'self' blob:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
        "frame-ancestors 'none'; form-action 'self'"
    )
    docs = client.get("/api/docs/")["Content-Security-Policy"]
    script_src = docs.split("script-src ")[1].split(";")[0].split()
    assert script_src[0] == "'self'" and len(script_src) == 2 and script_src[1].startswith("'sha256-")
    redoc = client.get("/api/redoc/")["Content-Security-Policy"]
    assert "style-src 'self' 'unsafe-inline' https://fonts.googleapis.com;" in redoc
    assert "worker-src 'self' blob:" in redoc and "script-src 'self';" in redoc
    browsable = client.get("/api/projects/", HTTP_ACCEPT="text/html")["Content-Security-Policy"]
    assert browsable == pages_policy.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
    # JSON keeps no policy; a 404 page has ours, except Django's technical page when DEBUG is on.
    assert "Content-Security-Policy" not in client.get("/api/me/")
    assert client.get("/no-such-page/")["Content-Security-Policy"] == pages_policy
    settings.DEBUG = True
    assert "Content-Security-Policy" not in client.get("/no-such-page/")


def test_an_injected_inline_script_is_refused(page, login, live_server, world):
    """What a stored-XSS payload would do: put a <script> or an onerror handler into the page."""
    page.add_init_script(RECORD_VIOLATIONS)
    login(page, "root")
    page.goto(f"{live_server.url}/projects/boxes/")
    page.evaluate("""() => {
        window.ran = [];
        const s = document.createElement("script");
        s.textContent = "window.ran.push('script')";
        document.body.append(s);
        const holder = document.createElement("div");
        holder.innerHTML = '<img src="/nothing.png" onerror="window.ran.push(\\'onerror\\')">';
        document.body.append(holder);
    }""")
    page.wait_for_function("() => window.cspViolations.length >= 2")
    assert page.evaluate("window.ran") == []
    assert any(v.startswith("script-src") for v in page.evaluate("window.cspViolations"))
