"""The seeded world of the permission matrix (tests/test_permission_matrix.py): one user per
identity of tests/helpers/permission_rules.py, their tokens, the projects (`mine`, its video twin
`osc`, `other`) and a row of each kind a route's arguments name."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.models import (
    Annotation,
    ImportRun,
    Item,
    ItemStatus,
    MediaAsset,
    Membership,
    Project,
    ProjectAsset,
    ProjectInvite,
    Role,
    Task,
    TaskStatus,
)
from inference.models import InferenceJob, JobStatus
from tests.helpers.permission_rules import (
    ANNOTATOR,
    ANON,
    CROWD,
    CROWD_ELSEWHERE,
    CROWD_PID,
    IDENTITIES,
    MEMBER_ROLE,
    OTHER,
    RESEARCHER,
    SUPERUSER,
)


@dataclass
class World:
    users: dict
    tokens: dict
    mine: Project
    osc: Project
    other: Project
    annotated: Item
    annotation: Annotation
    task: Task
    run: ImportRun
    finished_job: InferenceJob
    queued_job: InferenceJob
    asset: MediaAsset
    media_root: Path = field(default=None)
    invite_token: str = ""  # an expired invite of `mine`
    invite: object = None  # its row
    study: object = None  # a closed crowd study of `mine` with one participant
    participant: object = None


def build_world(media_root: Path) -> World:
    from django.contrib.auth import get_user_model

    from inference.services import predictions_import
    from protocols.oscbench import CRITERIA
    from tests.evaluation.factories import make_release, rate
    from tests.helpers.items import osc_payload, status_payload

    User = get_user_model()
    users = {
        who: User.objects.create_user(f"m-{who}", password=None)
        for who in IDENTITIES
        if who not in (ANON, SUPERUSER, CROWD, CROWD_ELSEWHERE)  # the crowd accounts come with their studies
    }
    users[SUPERUSER] = User.objects.create_superuser("m-superuser", "root@example.org", None)
    tokens = {who: Token.objects.create(user=u).key for who, u in users.items()}

    def project(slug_: str, protocol: str) -> Project:
        p = Project.objects.create(slug=slug_, name=slug_, protocol=protocol)
        for who, role in MEMBER_ROLE.items():
            Membership.objects.create(project=p, user=users[who], role=role)
        return p

    mine, osc = project("mine", "status"), project("mine-osc", "oscbench")
    other = Project.objects.create(slug="other", name="other", protocol="status")
    Membership.objects.create(project=other, user=users[OTHER], role=Role.RESEARCHER)

    release = make_release(mine, {f"it{i}": status_payload(i) for i in range(3)})
    make_release(osc, {f"g{i}": osc_payload("gen", i, "regular") for i in range(3)})
    for i, level in enumerate([1, 3, 5]):
        for rater in ("r1", "r2"):
            rate(f"g{i}", osc, rater, {c: level for c in CRITERIA})
    predictions_import(
        project=osc,
        lines=[
            json.dumps({"item": f"g{i}", "query": "judge", "answer": {c: lv for c in CRITERIA}})
            for i, lv in enumerate([2, 3, 4])
        ],
        model_name="j1",
        release=osc.releases.get(),
    )

    # A stored asset of an item of `mine`, the upload area and a job export on disk.
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 32
    sha = hashlib.sha256(png).hexdigest()
    rel = f"assets/{sha[:2]}/{sha}.png"
    for name, body in ((rel, png), ("incoming/upload.png", png), ("exports/job-1.json", b"{}")):
        (media_root / name).parent.mkdir(parents=True, exist_ok=True)
        (media_root / name).write_bytes(body)
    asset = MediaAsset.objects.create(sha256=sha, kind="image", file=rel, mime="image/png", size_bytes=len(png))
    ProjectAsset.objects.create(project=mine, asset=asset)  # stored by an import of `mine`

    annotated = Item.objects.create(
        project=mine,
        external_id="annotated",
        payload=status_payload(7),
        media={"image_a": sha, "image_b": sha},
        status=ItemStatus.ANNOTATED,
    )
    task = Task.objects.create(
        item=annotated,
        annotator=users[ANNOTATOR],
        status=TaskStatus.SUBMITTED,
        lease_expires=timezone.now() - timedelta(minutes=1),
    )
    annotation = Annotation.objects.create(
        item=annotated, annotator=users[ANNOTATOR], task=task, result={"state_a": "closed"}
    )
    run = ImportRun.objects.create(
        project=mine,
        created_by=users[RESEARCHER],
        file_name="items.jsonl",
        status="refused",
        errors=["line 1: field id: required"],
        error_count=1,
    )
    finished_job = InferenceJob.objects.create(
        model_name="m1",
        project=mine,
        release=release,
        protocol="status",
        status=JobStatus.FINISHED,
        finished_at=timezone.now(),
    )
    queued_job = InferenceJob.objects.create(
        model_name="m2", project=mine, release=release, protocol="status", status=JobStatus.QUEUED
    )
    invite_token = "expired-invite-token"
    invite = ProjectInvite.objects.create(
        project=mine,
        role=Role.ANNOTATOR,
        created_by=users[RESEARCHER],
        token_sha256=hashlib.sha256(invite_token.encode()).hexdigest(),
        expires_at=timezone.now() - timedelta(hours=1),
    )
    world = World(
        users,
        tokens,
        mine,
        osc,
        other,
        annotated,
        annotation,
        task,
        run,
        finished_job,
        queued_job,
        asset,
        media_root,
        invite_token,
        invite,
    )
    from annotation.models import CrowdAccount, Study, StudyParticipant

    world.study = Study.objects.create(
        project=mine,
        name="s",
        token="matrix-study-token",
        max_participants=1,
        tasks_per_participant=1,
        completion_code="C",
        is_open=False,
    )
    other_study = Study.objects.create(
        project=other,
        name="s2",
        token="matrix-other-study-token",
        max_participants=1,
        tasks_per_participant=1,
        completion_code="C",
    )
    for who, study, home, elsewhere in ((CROWD, world.study, mine, other), (CROWD_ELSEWHERE, other_study, other, mine)):
        crowd = User.objects.create_user(f"prolific-{CROWD_PID}-{who}", password=None)
        CrowdAccount.objects.create(user=crowd, study=study, platform="prolific", external_id=CROWD_PID)
        Membership.objects.create(project=home, user=crowd, role=Role.ANNOTATOR)
        Membership.objects.create(project=elsewhere, user=crowd, role=Role.RESEARCHER)  # gives nothing
        participant = StudyParticipant.objects.create(study=study, user=crowd, external_id=CROWD_PID)
        users[who], tokens[who] = crowd, Token.objects.create(user=crowd).key
        if who == CROWD:
            world.participant = participant
    return world
