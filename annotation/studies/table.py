"""Reading studies: the participants table (id, started / finished, active time from the
annotations' time spent, tasks, gold accuracy, flagged below the study's threshold, pay estimate
at its hourly rate), its CSV, and where a participant's page goes when their tasks run out.

The time spent is the server's measure of each submit (annotation/queue/submit.py, active_ms),
never the client's. A participant's account is their study's alone (studies/models.py,
CrowdAccount), so their annotations in the project are the work done for this study: the same id
in another study of the project is counted and paid there."""

from __future__ import annotations

import io
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Count
from django.urls import reverse

from protocols.kit.csv_cells import csv_writer

from ..agreement import gold_correct
from ..models import Annotation, ExcludedAnnotation, ParticipantStatus, Project, Study, StudyParticipant
from ..protocols import rating_gold_tolerance
from ..queue.quota import participation_of

CSV_COLUMNS = (
    "participant_id",
    "platform",
    "status",
    "started_at",
    "finished_at",
    "active_seconds",
    "tasks",
    "gold_items",
    "gold_correct",
    "gold_accuracy",
    "flagged",
    "pay_estimate",
    "currency",
    "platform_study_id",
    "platform_session_id",
)


def studies_of(*, project: Project):
    return (
        Study.objects.filter(project=project)
        .annotate(n_participants=Count("participants"))
        .order_by("-created_at", "-pk")
    )


def study_public_path(study: Study) -> str:
    return reverse("study-entry", kwargs={"token": study.token})


def _figures(rows, project: Project, into: dict) -> None:
    """Add (user or participant key, time spent, is gold, gold payload, result) rows to `into`."""
    workflow, tolerance = project.workflow, rating_gold_tolerance(project.protocol)
    for key, ms, is_gold, payload, result in rows:
        f = into.setdefault(key, {"tasks": 0, "ms": 0, "gold": 0, "right": 0})
        f["tasks"] += 1
        f["ms"] += ms or 0
        if is_gold:
            ok = gold_correct(workflow, payload, result, tolerance=tolerance)
            if ok is not None:
                f["gold"] += 1
                f["right"] += int(ok)


def participant_rows(*, study: Study) -> list[dict]:
    """One row per participant, in the order they joined."""
    project = study.project
    participants = list(study.participants.select_related("user").order_by("started_at", "pk"))
    live: dict = {}
    _figures(
        Annotation.objects.filter(item__project=project, annotator__in=[p.user_id for p in participants])
        .values_list("annotator_id", "time_spent_ms", "item__is_gold", "item__payload", "result")
        .iterator(chunk_size=2000),
        project,
        live,
    )
    excluded: dict = {}
    _figures(
        ExcludedAnnotation.objects.filter(participant__study=study)
        .values_list("participant_id", "time_spent_ms", "item__is_gold", "item__payload", "result")
        .iterator(chunk_size=2000),
        project,
        excluded,
    )
    rate = study.hourly_rate or Decimal(0)
    rows = []
    for p in participants:
        f = (excluded if p.status == ParticipantStatus.REJECTED else live).get(
            p.pk if p.status == ParticipantStatus.REJECTED else p.user_id, {"tasks": 0, "ms": 0, "gold": 0, "right": 0}
        )
        accuracy = round(f["right"] / f["gold"], 4) if f["gold"] else None
        seconds = round(f["ms"] / 1000, 1)
        pay = (rate * Decimal(f["ms"]) / Decimal(3_600_000)).quantize(Decimal("0.01"), ROUND_HALF_UP)
        rows.append(
            {
                "id": p.pk,
                "participant_id": p.external_id,
                "platform": study.platform,
                "status": p.status,
                "started_at": p.started_at,
                "finished_at": p.finished_at,
                "active_seconds": seconds,
                "tasks": f["tasks"],
                "gold_items": f["gold"],
                "gold_correct": f["right"],
                "gold_accuracy": accuracy,
                "flagged": accuracy is not None and accuracy < study.gold_pass_threshold,
                "pay_estimate": pay,
                "currency": study.currency,
                "platform_study_id": p.platform_study_id,
                "platform_session_id": p.platform_session_id,
            }
        )
    return rows


def study_totals(rows: list[dict]) -> dict:
    paid = [r for r in rows if r["status"] != ParticipantStatus.REJECTED]
    return {
        "participants": len(rows),
        "finished": sum(1 for r in rows if r["finished_at"]),
        "flagged": sum(1 for r in rows if r["flagged"]),
        "tasks": sum(r["tasks"] for r in paid),
        "pay_estimate": sum((r["pay_estimate"] for r in paid), Decimal("0.00")),
    }


def participants_csv(*, study: Study) -> str:
    out = io.StringIO()
    writer = csv_writer(out, lineterminator="\n")  # no cell starts like a formula
    writer.writerow(CSV_COLUMNS)
    for r in participant_rows(study=study):
        writer.writerow(
            [
                r["participant_id"],
                r["platform"],
                r["status"],
                r["started_at"].isoformat(),
                r["finished_at"].isoformat() if r["finished_at"] else "",
                r["active_seconds"],
                r["tasks"],
                r["gold_items"],
                r["gold_correct"],
                "" if r["gold_accuracy"] is None else r["gold_accuracy"],
                int(r["flagged"]),
                r["pay_estimate"],
                r["currency"],
                r["platform_study_id"],
                r["platform_session_id"],
            ]
        )
    return out.getvalue()


def finish_url_for(*, project: Project, user) -> str:
    """Where a study participant's annotate page goes when it runs out of tasks ("" for others)."""
    participant: StudyParticipant | None = participation_of(project=project, user=user)
    if participant is None:
        return ""
    return reverse("study-finish", kwargs={"token": participant.study.token})
