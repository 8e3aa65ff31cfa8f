"""statelab_client.StateLabClient against a live server, one operation at a time."""

from __future__ import annotations

import json

import pytest

from annotation.models import Item, Release
from inference.models import InferenceJob
from statelab_client import ApiError, StateLabClient

from .conftest import BAD_IMPORT_ERRORS, files_in

pytestmark = pytest.mark.django_db(transaction=True)  # live server: committed rows


@pytest.fixture
def client(api_world):
    with StateLabClient(api_world["url"], api_world["token"]) as c:
        yield c


def test_the_token_names_its_user_and_their_projects(client):
    assert client.me() == {"username": "res", "is_superuser": False}
    assert [(p["slug"], p["protocol"], p["role"], p["items"]) for p in client.projects()] == [
        ("lemons", "status", "researcher", 0)
    ]


def test_an_import_is_uploaded_with_progress_and_followed_until_it_finishes(client, api_world):
    sent = []
    run = client.import_upload(
        "lemons", api_world["zip"], verified=True, on_bytes=lambda done, total: sent.append((done, total))
    )
    size = api_world["zip"].stat().st_size
    assert run["file_bytes"] == size and run["file_name"] == "items.zip"
    assert sent[-1] == (size, size) and [d for d, _ in sent] == sorted(d for d, _ in sent)
    seen = []
    done = client.wait_import(run, poll=0.05, on_poll=seen.append)
    assert (done["status"], done["report"]["created"], done["report"]["by_status"]) == ("finished", 3, {"verified": 3})
    assert seen[-1] == done
    assert Item.objects.filter(project=api_world["project"]).count() == 3


def test_a_refused_import_ends_refused_with_its_error_lines_and_writes_nothing(client, api_world):
    run = client.wait_import(client.import_upload("lemons", api_world["bad"]), poll=0.05)
    assert (run["status"], run["error_count"], run["errors"], run["report"]) == ("refused", 2, BAD_IMPORT_ERRORS, None)
    assert not Item.objects.filter(project=api_world["project"]).exists()


def test_freeze_then_export_streams_the_release_to_disk_in_chunks(client, api_world):
    client.wait_import(client.import_upload("lemons", api_world["zip"], verified=True), poll=0.05)
    release = client.freeze("lemons", "v1")
    assert (release["version"], release["split"], release["item_count"]) == ("v1", "test", 3)
    assert [r["version"] for r in client.releases("lemons")] == ["v1"]

    out = api_world["tmp"] / "out"
    out.mkdir()
    progress = []
    path = client.export("lemons", "v1", out, on_bytes=lambda done, total: progress.append(done), chunk_size=256)
    assert path == out / "lemons-v1.json" and files_in(out) == ["lemons-v1.json"]  # no .part left behind
    doc = json.loads(path.read_text())
    assert (doc["item_count"], doc["checksum"]) == (3, release["checksum"])
    assert len(progress) > 1 and progress[-1] == path.stat().st_size  # several chunks, in order
    assert progress == sorted(progress)
    zipped = client.export("lemons", "v1", out / "copy.zip", fmt="zip")
    assert zipped.read_bytes()[:2] == b"PK"
    assert client.export("lemons", "v1", f"{out}/nested/") == out / "nested" / "lemons-v1.json"  # a new folder

    with pytest.raises(ApiError) as dup:
        client.freeze("lemons", "v1")
    assert dup.value.status == 400 and "exists already" in dup.value.message
    assert Release.objects.filter(project=api_world["project"]).count() == 1
    with pytest.raises(ApiError) as bad_fmt:
        client.export("lemons", "v1", out / "x.exe", fmt="exe")  # type: ignore[arg-type]
    # the release formats, then the authors' own (a STATUS release exports back as STATUS_Bench.json)
    assert (bad_fmt.value.status, bad_fmt.value.message) == (
        400,
        "fmt must be one of json, jsonl, zip, hf, status-bench",
    )
    with pytest.raises(ApiError) as missing:
        client.export("lemons", "v9", out)
    assert missing.value.status == 404
    assert files_in(out) == ["copy.zip", "lemons-v1.json", "nested"]


def test_a_job_is_launched_followed_and_scored_on_the_leaderboard(client, api_world, random_endpoint):
    client.wait_import(client.import_upload("lemons", api_world["zip"], verified=True), poll=0.05)
    client.freeze("lemons", "v1")
    job = client.launch_job("lemons", "random-vlm", release="v1", params={"seed": 3})
    assert (job["model"], job["project"], job["protocol"]) == ("random-vlm", "lemons", "status")
    polls = []
    final = client.wait_job(job["id"], poll=0.05, on_poll=polls.append)
    assert (final["status"], final["done"], final["failed"], final["percent"]) == ("finished", final["total"], 0, 100.0)
    assert final["total"] > 0 and polls[-1] == final
    assert InferenceJob.objects.get(pk=job["id"]).params == {"seed": 3}
    assert client.cancel_job(job["id"]) is False  # already ended: the server's 409

    board = client.leaderboard("lemons", release="v1")
    assert board["release"] == "v1" and "random-vlm" in [row["model"] for row in board["rows"]]
    csv = client.leaderboard("lemons", release="v1", fmt="csv")
    assert csv.splitlines()[0].startswith("model,") and any(line.startswith("random-vlm,") for line in csv.splitlines())
    assert "\\begin{tabular}" in client.leaderboard("lemons", release="v1", fmt="latex")
    assert client.leaderboard("lemons", release="v1", fmt="markdown").startswith("|")

    with pytest.raises(ApiError) as unknown:
        client.launch_job("lemons", "no-such-model")
    assert (unknown.value.status, unknown.value.message) == (400, "no usable endpoint named 'no-such-model'")
    with pytest.raises(ApiError) as refused:
        client.launch_job("lemons", "random-vlm", params={"frames": 0})
    assert (refused.value.status, refused.value.message) == (400, "frames must be a positive integer")
    with pytest.raises(ApiError) as no_release:
        client.launch_job("lemons", "random-vlm", release="v7")
    assert no_release.value.message == "project lemons has no release 'v7'"
    assert InferenceJob.objects.count() == 1


def test_correlation_tables_of_a_video_rating_project(client, api_world, make_project, tmp_path):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from annotation.models import Membership, Role
    from protocols.oscbench import CRITERIA
    from tests.evaluation.factories import make_release, rate
    from tests.helpers.files import write_predictions
    from tests.helpers.items import osc_payload

    project = make_project("osc", "oscbench", annotations_per_item=3)
    Membership.objects.create(project=project, user=get_user_model().objects.get(username="res"), role=Role.RESEARCHER)
    levels = {
        f"{g}{i}": level
        for g, base in (("genA", 4), ("genB", 2))
        for i, level in enumerate((base + 1, base, base, base - 1))
    }
    make_release(project, {ext: osc_payload(ext[:4], int(ext[4]), "regular") for ext in levels})
    for ext, level in levels.items():
        for k, rater in enumerate(("r1", "r2", "r3")):
            rate(ext, project, rater, {c: min(5, max(1, level + (k - 1) * (c == "realism"))) for c in CRITERIA})
    judged = [
        {"item": ext, "query": "judge", "answer": json.dumps({"scores": {c: level for c in CRITERIA}})}
        for ext, level in levels.items()
    ]
    call_command(
        "import_predictions", "osc", write_predictions(tmp_path, judged), "--model", "judge-1", "--release", "v1"
    )

    report = client.correlation("osc")
    assert list(report) == ["criteria", "judges", "human"] and report["judges"][0]["judge"] == "judge-1"
    csv = client.correlation("osc", fmt="csv").splitlines()
    assert csv[0].startswith("source,criterion,kendall_tau_b") and any(line.startswith("judge-1,") for line in csv)
    assert "\\begin{tabular}" in client.correlation("osc", fmt="latex")
    with pytest.raises(ApiError) as not_video:
        client.correlation("lemons")
    assert not_video.value.status == 404


def test_refusals_carry_the_servers_message(api_world):
    with StateLabClient(api_world["url"], "not-a-token") as anonymous:
        with pytest.raises(ApiError) as bad_token:
            anonymous.projects()
    assert (bad_token.value.status, bad_token.value.message) == (401, "Invalid token.")
    with StateLabClient(api_world["url"], api_world["annotator_token"]) as annotator:
        with pytest.raises(ApiError) as low_role:
            annotator.freeze("lemons", "v1")
        assert low_role.value.status == 403
        with pytest.raises(ApiError) as outsider:
            annotator.releases("nowhere")
        assert outsider.value.status == 404
    with StateLabClient(api_world["url"], api_world["token"]) as researcher:
        with pytest.raises(ApiError) as invalid:
            researcher.freeze("lemons", "")
    assert (invalid.value.status, invalid.value.message, invalid.value.path) == (
        400,
        "version: This field may not be blank.",
        "/api/projects/lemons/releases/",
    )
    assert not Release.objects.exists()
