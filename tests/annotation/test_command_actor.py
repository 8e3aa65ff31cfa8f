"""--actor on the commands that import, freeze, export and launch inference jobs
(annotation/management/actor.py): the audit event names the actor, who must hold the role the page,
admin or API asks for (researcher or admin of the project); without --actor it names nobody and
says source=cli; an unknown account or a role too low is refused naming it, and nothing is
written. A project that import_items --create makes is recorded as created, as the new-project
page records it."""

from __future__ import annotations

import json
from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command

from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import Annotation, AuditEvent, Item, Membership, Project, Release, Role
from inference.models import InferenceJob, Prediction
from inference.services import endpoint_create
from tests.evaluation.factories import make_release
from tests.helpers.items import status_payload

pytestmark = pytest.mark.django_db

RATING = {
    "subject": 4,
    "object": 5,
    "action": 3,
    "osc_accuracy": 2,
    "osc_consistency": 3,
    "scene": None,
    "realism": 4,
    "aesthetics": 5,
}


@pytest.fixture
def w(make_user, make_project, tmp_path):
    """Project "cmd" (status, release v1 of two verified items) and "osc" (two pending oscbench
    items), each with a researcher, an admin and an annotator; "elsewhere" has its own researcher;
    and one input file per command."""
    res, adm, ann, other, root = (make_user(n) for n in ("res", "adm", "ann", "other", None))
    root.is_superuser = True
    root.save()
    members = {res: Role.RESEARCHER, adm: Role.ADMIN, ann: Role.ANNOTATOR}
    cmd, osc = make_project("cmd", "status", members=members), make_project("osc", "oscbench", members=members)
    make_project("elsewhere", "status", members={other: Role.RESEARCHER})
    make_release(cmd, {"r1": status_payload(1), "r2": status_payload(2)}, version="v1")
    items_import(project=osc, path=write_sample_dataset(tmp_path / "osc", "oscbench", 2))
    ratings = tmp_path / "ratings.jsonl"
    ratings.write_text(json.dumps({"item": "oscbench-00000", "rater": "r1", "scores": RATING}) + "\n")
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(json.dumps({"item": "r1", "query": "sci2", "answer": "A"}) + "\n")
    endpoint_create(name="rnd", backend="random")
    AuditEvent.objects.all().delete()  # the setup's own import
    return SimpleNamespace(
        res=res,
        adm=adm,
        ann=ann,
        other=other,
        root=root,
        cmd=cmd,
        osc=osc,
        tmp=tmp_path,
        items=write_sample_dataset(tmp_path / "items", "status", 2),
        ratings=ratings,
        predictions=predictions,
        export=tmp_path / "out.jsonl",
    )


# Each command: its arguments, and the event it records (action, project, object type).
COMMANDS = {
    "import_items": (lambda w: ["import_items", "cmd", str(w.items)], ("import", "cmd", "items import")),
    "import_annotations": (
        lambda w: ["import_annotations", "osc", str(w.ratings)],
        ("import", "osc", "annotations import"),
    ),
    "freeze_release": (lambda w: ["freeze_release", "cmd", "v2"], ("freeze", "cmd", "annotation.release")),
    "export_release": (
        lambda w: ["export_release", "cmd", "v1", "--jsonl", "-o", str(w.export)],
        ("export", "cmd", "annotation.release"),
    ),
    "import_predictions": (
        lambda w: ["import_predictions", "cmd", str(w.predictions), "--model", "m", "--release", "v1"],
        ("import", "cmd", "inference.inferencejob"),
    ),
    "run_inference": (
        lambda w: ["run_inference", "--endpoint", "rnd", "--project", "cmd", "--release", "v1", "--protocol", "status"],
        ("launch", "cmd", "inference.inferencejob"),
    ),
}


def run(*args: str) -> None:
    call_command(*args, stdout=StringIO(), stderr=StringIO())


def state(w) -> tuple:
    """Every row a command could write, and the export file."""
    return (
        Project.objects.count(),
        Item.objects.count(),
        Annotation.objects.count(),
        Release.objects.count(),
        InferenceJob.objects.count(),
        Prediction.objects.count(),
        AuditEvent.objects.count(),
        w.export.exists(),
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_without_actor_the_event_names_nobody_and_the_command_line(w, command):
    args, (action, project, object_type) = COMMANDS[command]
    run(*args(w))
    event = AuditEvent.objects.get()
    assert (event.action, event.project.slug, event.object_type) == (action, project, object_type)
    assert (event.actor, event.actor_name, event.details["source"]) == (None, "", "cli")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("who", ["res", "adm", "root"])
def test_the_actor_is_recorded(w, command, who):
    args, (action, project, _type) = COMMANDS[command]
    run(*args(w), "--actor", getattr(w, who).username)
    event = AuditEvent.objects.get()
    assert (event.action, event.project.slug, event.actor, event.actor_name, event.details["source"]) == (
        action,
        project,
        getattr(w, who),
        getattr(w, who).username,
        "cli",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_actor_is_refused_by_name_and_nothing_is_written(w, command):
    args, _event = COMMANDS[command]
    before = state(w)
    with pytest.raises(CommandError, match="--actor: no user 'ghost'"):
        run(*args(w), "--actor", "ghost")
    assert state(w) == before


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("who", ["ann", "other"])
def test_an_actor_without_the_role_is_refused_and_nothing_is_written(w, command, who):
    """The annotator of the project, and a researcher of another project."""
    args, (_action, project, _type) = COMMANDS[command]
    before = state(w)
    user = getattr(w, who)
    with pytest.raises(
        CommandError, match=f"--actor: {user.username} is not a researcher \\(or above\\) of project {project}"
    ):
        run(*args(w), "--actor", user.username)
    assert state(w) == before


def test_an_inactive_actor_is_refused(w):
    w.res.is_active = False
    w.res.save()
    with pytest.raises(CommandError, match="--actor: the account 'res' is inactive"):
        run("freeze_release", "cmd", "v2", "--actor", "res")
    assert not Release.objects.filter(version="v2").exists()


def test_the_source_is_only_the_commands(w):
    """An event recorded after a command, outside it, does not say cli."""
    run("freeze_release", "cmd", "v2")
    from annotation.releases import release_freeze

    release_freeze(project=w.cmd, version="v3", user=w.res)
    assert [e.details.get("source") for e in AuditEvent.objects.order_by("pk")] == ["cli", None]


# --- import_items --create ---------------------------------------------------------------------


def test_a_project_created_for_the_actor_makes_them_its_admin(w):
    run("import_items", "fresh", str(w.items), "--protocol", "status", "--create", "--actor", "res")
    fresh = Project.objects.get(slug="fresh")
    assert dict(Membership.objects.filter(project=fresh).values_list("user__username", "role")) == {"res": "admin"}
    creation, imported = AuditEvent.objects.order_by("pk")
    assert (creation.action, creation.project, creation.object_id, creation.actor, creation.actor_name) == (
        "project_create",
        fresh,
        str(fresh.pk),
        w.res,
        "res",
    )
    assert creation.details == {
        "protocol": "status",
        "annotations_per_item": fresh.annotations_per_item,
        "settings": {},
        "creator_role": "admin",
        "option_seed": 0,
        "source": "cli",
    }
    assert (imported.action, imported.project, imported.actor, imported.details["created"]) == (
        "import",
        fresh,
        w.res,
        2,
    )


def test_a_project_created_without_actor_is_recorded_as_created_by_nobody(w):
    run("import_items", "fresh", str(w.items), "--protocol", "status", "--create")
    fresh = Project.objects.get(slug="fresh")
    assert not Membership.objects.filter(project=fresh).exists()
    assert list(AuditEvent.objects.order_by("pk").values_list("action", "project", "actor", "actor_name")) == [
        ("project_create", fresh.pk, None, ""),
        ("import", fresh.pk, None, ""),
    ]
    creation = AuditEvent.objects.get(action="project_create")
    assert (creation.details["creator_role"], creation.details["source"]) == (None, "cli")


def test_a_project_created_for_a_release_export_records_its_option_seed(w):
    """A JSON release export (header and items) next to the sample's media: the new project takes
    its seed and protocol, and the creation event says so."""
    lines = [json.loads(line) for line in w.items.read_text().splitlines()]
    export = w.items.parent / "release.json"
    export.write_text(json.dumps({"protocol": "status", "option_seed": 42, "items": lines}))
    run("import_items", "copy", str(export), "--create", "--actor", "adm")
    copy = Project.objects.get(slug="copy")
    creation = AuditEvent.objects.get(action="project_create")
    assert (copy.option_seed, copy.protocol) == (42, "status")
    assert (creation.project, creation.actor, creation.details["protocol"], creation.details["option_seed"]) == (
        copy,
        w.adm,
        "status",
        42,
    )


def test_create_of_an_existing_project_records_no_creation(w):
    run("import_items", "cmd", str(w.items), "--protocol", "status", "--create", "--actor", "res")
    assert list(AuditEvent.objects.values_list("action", flat=True)) == ["import"]


def test_creating_a_project_needs_the_right_to_create_one(w):
    before = state(w)
    with pytest.raises(CommandError, match="--actor: ann may not create projects"):
        run("import_items", "fresh", str(w.items), "--protocol", "status", "--create", "--actor", "ann")
    assert state(w) == before and not Project.objects.filter(slug="fresh").exists()


def test_a_refused_import_into_a_created_project_leaves_no_project_nor_membership(w):
    bad = w.tmp / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(CommandError, match="import refused"):
        run("import_items", "fresh", str(bad), "--protocol", "status", "--create", "--actor", "res")
    assert not Project.objects.filter(slug="fresh").exists()
    assert not Membership.objects.filter(project__slug="fresh").exists() and not AuditEvent.objects.exists()


def test_a_refused_import_without_actor_leaves_no_project_nor_its_creation_event(w):
    bad = w.tmp / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    before = state(w)
    with pytest.raises(CommandError, match="import refused"):
        run("import_items", "fresh", str(bad), "--protocol", "status", "--create")
    assert state(w) == before and not Project.objects.filter(slug="fresh").exists()


def test_create_on_an_existing_project_still_needs_the_role_there(w):
    before = state(w)
    with pytest.raises(CommandError, match="--actor: other is not a researcher"):
        run("import_items", "cmd", str(w.items), "--protocol", "status", "--create", "--actor", "other")
    assert state(w) == before


# --- export_release: each format is recorded --------------------------------------------------


def test_export_formats_each_record_one_event(w, make_project):
    from annotation.releases import release_freeze
    from tests.inference import factories

    media = make_project("media", "status", members={w.res: Role.RESEARCHER, w.adm: Role.ADMIN})
    factories.status_items(media, 1, w.tmp)  # verified, with stored images
    release_freeze(project=media, version="v1")
    run("export_release", "media", "v1", "-o", str(w.tmp / "r.json"), "--actor", "res")
    run("export_release", "media", "v1", "--format", "lmms-eval", "-o", str(w.tmp / "lmms"), "--actor", "adm")
    run("export_release", "media", "v1", "--format", "hf", "-o", str(w.tmp / "hf"))
    rows = list(AuditEvent.objects.filter(action="export").order_by("pk").values_list("actor_name", "details"))
    assert rows == [
        ("res", {"format": "json", "source": "cli"}),
        ("adm", {"format": "lmms-eval", "source": "cli"}),
        ("", {"format": "hf", "source": "cli"}),
    ]


def test_a_refused_export_records_nothing(w):
    with pytest.raises(CommandError, match="a zip export needs -o FILE"):
        run("export_release", "cmd", "v1", "--zip", "--actor", "res")
    assert not AuditEvent.objects.exists()


# --- run_inference: the job names its launcher ---------------------------------------------------


@pytest.mark.parametrize("who", [None, "res", "adm", "root"])
def test_the_launched_job_is_created_by_the_actor(w, who):
    args, _event = COMMANDS["run_inference"]
    user = getattr(w, who) if who else None
    run(*args(w), *(["--actor", user.username] if user else []))
    job = InferenceJob.objects.get()
    event = AuditEvent.objects.get()
    assert (job.created_by, job.project, job.release.version, job.model_name) == (user, w.cmd, "v1", "rnd")
    assert (event.object_id, event.actor, event.details) == (str(job.pk), user, {"mode": "evaluate", "source": "cli"})


def test_a_refused_launch_records_nothing(w):
    """A job the service refuses (a protocol the project does not use) is refused before the event."""
    before = state(w)
    with pytest.raises(CommandError, match="project cmd uses the status protocol, not oscbench"):
        run("run_inference", "--endpoint", "rnd", "--project", "cmd", "--protocol", "oscbench", "--actor", "res")
    assert state(w) == before
