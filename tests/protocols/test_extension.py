"""A protocol defined only in the tests (tests/protocols/sample_protocol/) and registered by one
line of STATELAB_PROTOCOLS goes the whole way through the platform's own code paths: project
created through the API, items imported through the import API (a worker in eager mode), blind
answers through the task API, review through the review API, a release frozen through the
releases API, predictions imported by the command and made by a seeded Random job started through
the jobs API, then the leaderboard through its API: model rows, the Random and the Human row.

Nothing of annotation/, inference/, evaluation/, templates/ or static/ names the protocol.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.test import override_settings
from django.urls import get_resolver
from PIL import Image

from annotation.models import Item, ItemStatus, Project, Release, ReleaseItem, Role
from inference.models import InferenceJob
from inference.services import endpoint_create
from protocols import registry
from tests.helpers.admin import admin_save
from tests.helpers.clients import logged_in, token_client
from tests.helpers.files import write_predictions
from tests.helpers.items import run_command

# Every module a request reaches is loaded before any test changes the setting, as in a running
# server: what reads the registry when a module loads would miss the new protocol.
get_resolver().url_patterns  # noqa: B018

SAMPLE = "tests.protocols.sample_protocol"
WITH_SAMPLE = override_settings(STATELAB_PROTOCOLS=[*registry.BUILT_IN, SAMPLE])

# Four questions: (id, the object's state, the truth, the annotator's blind answer).
QUESTIONS = [
    ("lid-0", "open", "A", "A"),
    ("lid-1", "closed", "B", "B"),
    ("lid-2", "open", "A", "A"),
    ("lid-3", "closed", "B", "A"),
]


def items_zip() -> io.BytesIO:
    """items.jsonl (raw items: no answer) with one distinct image per item."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        lines = []
        for n, (ext, state, _, _) in enumerate(QUESTIONS):
            picture = io.BytesIO()
            Image.new("RGB", (24 + n, 16), (40 * n, 200 if state == "open" else 20, 90)).save(picture, "PNG")
            zf.writestr(f"img/{ext}.png", picture.getvalue())
            lines.append(
                json.dumps(
                    {
                        "id": ext,
                        "image": f"img/{ext}.png",
                        "object": "jar",
                        "question": "Is the jar's lid open?",
                        "options": ["yes", "no"],
                        "state": state,
                    }
                )
            )
        zf.writestr("items.jsonl", "\n".join(lines) + "\n")
    archive.seek(0)
    archive.name = "items.zip"
    return archive


@pytest.fixture
def people(make_user):
    return {"res": make_user("res", superuser=True), "ann": make_user("ann"), "rev": make_user("rev")}


@WITH_SAMPLE
@pytest.mark.django_db(transaction=True)  # imports and jobs are sent when their rows are committed
def test_a_protocol_defined_in_the_tests_goes_from_import_to_leaderboard(people, eager, tmp_path):
    res, ann, rev = (token_client(people[k]) for k in ("res", "ann", "rev"))

    # A project of the new protocol, through the API; the registry is read as the request comes.
    made = res.post(
        "/api/projects/", {"name": "Lids", "slug": "lids", "protocol": "lidcheck", "suggestions": False}, format="json"
    )
    assert made.status_code == 201, made.content
    assert (made.json()["protocol"], made.json()["workflow"]) == ("lidcheck", "qa")
    for user, role in ((people["ann"], Role.ANNOTATOR), (people["rev"], Role.REVIEWER)):
        added = res.post(
            "/api/projects/lids/members/", {"username_or_email": user.username, "role": role}, format="json"
        )
        assert added.status_code == 201, added.content
    # The admin's project form validates the protocol against the registry as it is now too.
    project = Project.objects.get(slug="lids")
    saved = admin_save(logged_in(people["res"]), project, {**project.settings, "lease_seconds": 900})
    assert saved.status_code == 302, saved.context["adminform"].form.errors if saved.context else saved.content
    project.refresh_from_db()
    assert (project.protocol, project.settings["lease_seconds"]) == ("lidcheck", 900)
    project.full_clean()

    # Import: the item fields are the protocol's own; raw items wait for annotators.
    queued = res.post("/api/projects/lids/imports/", {"file": items_zip()}, format="multipart")
    assert queued.status_code == 202, queued.content
    run = res.get(queued["Location"]).json()
    assert (run["status"], run["report"]["created"], run["report"]["by_status"]) == ("finished", 4, {"pending": 4})
    refused = res.post(
        "/api/projects/lids/imports/",
        {
            "file": _jsonl(
                '{"id": "x", "image": "img/lid-0.png", "object": "jar", "question": "Open?", "options": ["no", "yes"]}'
            )
        },
        format="multipart",
    )
    assert res.get(refused["Location"]).json()["errors"] == ['line 1: field options: must be ["yes", "no"]']

    # Annotate: each item once, blind (the state the scoring breaks down by never reaches the annotator).
    answers = {ext: blind for ext, _, _, blind in QUESTIONS}
    for _ in QUESTIONS:
        task = ann.post("/api/projects/lids/tasks/next/", {}, format="json")
        assert task.status_code == 200, task.content
        shown = task.json()["item"]
        assert "closed" not in json.dumps(shown) and '"open"' not in json.dumps(shown)
        assert shown["options"] == [{"letter": "A", "text": "yes"}, {"letter": "B", "text": "no"}]
        assert shown["question"] == "Is the jar's lid open?"
        ext = Item.objects.get(pk=shown["id"]).external_id
        submitted = ann.post(
            f"/api/tasks/{task.json()['task']}/submit/",
            {"result": {"answer": answers[ext], "flags": []}, "time_spent_ms": 9000},
            format="json",
        )
        assert submitted.status_code == 201, submitted.content
    assert ann.post("/api/projects/lids/tasks/next/", {}, format="json").status_code == 204

    # Review: three answers accepted, the wrong one edited to the truth.
    queue = rev.get("/api/projects/lids/review/")
    assert queue.status_code == 200, queue.content
    for ext, _, truth, blind in QUESTIONS:
        item = Item.objects.get(project__slug="lids", external_id=ext)
        detail = rev.get(f"/api/items/{item.pk}/review/").json()
        [annotation] = detail["annotations"]
        decision = (
            {"decision": "accept", "annotation": annotation["id"]}
            if truth == blind
            else {"decision": "edit", "result": {"answer": truth, "flags": []}}
        )
        decided = rev.post(f"/api/items/{item.pk}/review/", decision, format="json")
        assert decided.status_code == 201, decided.content
    assert dict(Item.objects.filter(project__slug="lids").values_list("external_id", "payload__answer")) == {
        ext: truth for ext, _, truth, _ in QUESTIONS
    }
    assert set(Item.objects.filter(project__slug="lids").values_list("status", flat=True)) == {ItemStatus.VERIFIED}

    # Release: the protocol's queries are frozen with the items.
    frozen = res.post("/api/projects/lids/releases/", {"version": "v1"}, format="json")
    assert frozen.status_code == 201, frozen.content
    assert frozen.json()["item_count"] == 4
    resolved = ReleaseItem.objects.filter(release__version="v1").order_by("position").first().payload["resolved"]
    assert resolved == {"qa": {"options": ["yes", "no"], "answer": "A", "format": "choice"}}

    # Predictions made elsewhere (option text or letter), read by the protocol's answer kind.
    preds = [
        {"item": "lid-0", "query": "qa", "answer": "yes"},
        {"item": "lid-1", "query": "qa", "answer": "no"},
        {"item": "lid-2", "query": "qa", "answer": "no"},
        {"item": "lid-3", "query": "qa", "answer": "B"},
    ]
    out = run_command("import_predictions", "lids", write_predictions(tmp_path, preds), "--model", "texty")
    assert out.startswith("imported 4 predictions as job") and "on release v1; 0 unparseable" in out

    # A model run through the protocol's prompts: a seeded random endpoint, started through the API.
    endpoint_create(name="coin", backend="random", options={"seed": 3})
    started = res.post("/api/projects/lids/jobs/", {"endpoint": "coin", "release": "v1"}, format="json")
    assert started.status_code == 201, started.content
    job = InferenceJob.objects.get(model_name="coin")
    assert (job.status, job.protocol, job.prompt_version, job.total_queries, job.done_queries, job.failed_queries) == (
        "finished",
        "lidcheck",
        "lidcheck-v1",
        4,
        4,
        0,
    )
    assert all("Is the jar's lid open?\nA. yes\nB. no" in p for p in job.predictions.values_list("prompt", flat=True))

    # The board: the protocol's metrics, a seeded Random row and the blind answers as the Human row.
    board = res.get("/api/projects/lids/leaderboard/")
    assert board.status_code == 200, board.content
    board = board.json()
    assert (board["protocol"], board["release"]) == ("lidcheck", "v1")
    rows = {row["model"]: row for row in board["rows"]}
    assert set(rows) == {"texty", "coin", "Random", "Human"}
    assert rows["texty"]["metrics"] == {"accuracy": 75.0, "acc_open": 50.0, "acc_closed": 100.0}
    assert (rows["texty"]["n"], rows["texty"]["parse_failures"]) == (4, 0)
    assert rows["Human"]["metrics"] == {"accuracy": 75.0, "acc_open": 100.0, "acc_closed": 50.0}
    truths = {ext: truth for ext, _, truth, _ in QUESTIONS}
    right = sum(answer == truths[ext] for ext, answer in job.predictions.values_list("item__external_id", "answer"))
    assert rows["coin"]["metrics"]["accuracy"] == right * 25.0 and rows["coin"]["parse_failures"] == 0
    assert Release.objects.get(project__slug="lids").item_count == 4


def _jsonl(text: str) -> io.BytesIO:
    upload = io.BytesIO((text + "\n").encode())
    upload.name = "items.jsonl"
    return upload


def test_the_built_in_setting_does_not_know_the_test_protocol():
    # The extension is the setting's line: without it the name is unknown (nothing else registers it).
    assert "lidcheck" not in registry.names()
    with WITH_SAMPLE:
        assert registry.names()[-1] == "lidcheck" and registry.get("lidcheck").workflow == "qa"
