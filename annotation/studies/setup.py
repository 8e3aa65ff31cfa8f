"""Opening and closing a crowd study of a project (researchers; page and API), fields checked one
by one before anything is written. The public link is /study/<token>/ (token: 32 random bytes)."""

from __future__ import annotations

import re
import secrets
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.utils import timezone

from ..audit.record import audit_record
from ..models import AuditAction, Project, Study, StudyPlatform
from ..project_setup import SetupInvalid

MAX_PARTICIPANTS = 100_000
MAX_TASKS = 10_000
MAX_MINUTES = 7 * 24 * 60
CODE_RE = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
STUDY_FIELDS = (
    "name",
    "platform",
    "max_participants",
    "tasks_per_participant",
    "completion_code",
    "return_url",
    "redirect_on_finish",
    "time_limit_minutes",
    "gold_pass_threshold",
    "hourly_rate",
    "currency",
)


class StudyRefused(Exception):
    """A change the study's state refuses (HTTP 409); nothing changed."""


def _whole(value: Any, name: str, low: int, high: int, errors: dict[str, str]) -> int | None:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        errors[name] = f"A whole number from {low} to {high}."
        return None
    return value


def _number(value: Any, name: str, low: float, high: float, errors: dict[str, str], message: str):
    try:
        number = Decimal(str(value).strip()) if not isinstance(value, bool) and value is not None else None
    except InvalidOperation:
        number = None
    if number is None or not number.is_finite() or not low <= number <= high:
        errors[name] = message
        return None
    return number


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def study_check(**values) -> dict[str, Any]:
    """The study's fields from form or JSON values; SetupInvalid naming every bad field."""
    errors: dict[str, str] = {}
    out: dict[str, Any] = {}
    out["name"] = _text(values.get("name"))[:200]
    if not out["name"]:
        errors["name"] = 'A name, e.g. "Pilot 1".'
    platform = _text(values.get("platform")) or StudyPlatform.PROLIFIC
    if platform not in StudyPlatform.values:
        errors["platform"] = f"One of {', '.join(StudyPlatform.values)}."
    out["platform"] = platform
    out["max_participants"] = _whole(values.get("max_participants"), "max_participants", 1, MAX_PARTICIPANTS, errors)
    out["tasks_per_participant"] = _whole(
        values.get("tasks_per_participant"), "tasks_per_participant", 1, MAX_TASKS, errors
    )
    out["completion_code"] = _text(values.get("completion_code"))
    if not CODE_RE.match(out["completion_code"]):
        errors["completion_code"] = "The platform's completion code: letters, digits, - and _ (up to 100)."
    out["return_url"] = _text(values.get("return_url"))[:1000]
    if out["return_url"]:
        try:
            URLValidator(schemes=["https", "http"])(out["return_url"].replace("{code}", "CODE"))
        except ValidationError:
            errors["return_url"] = "An http(s) address, e.g. https://app.prolific.com/submissions/complete?cc={code}."
    redirect = values.get("redirect_on_finish", False)
    out["redirect_on_finish"] = (
        redirect if isinstance(redirect, bool) else _text(redirect).lower() in ("on", "true", "1", "yes")
    )
    if out["redirect_on_finish"] and not out["return_url"]:
        errors["redirect_on_finish"] = "Sending participants back needs a return URL."
    minutes = values.get("time_limit_minutes")
    out["time_limit_minutes"] = (
        None if minutes in (None, "") else _whole(minutes, "time_limit_minutes", 1, MAX_MINUTES, errors)
    )
    threshold = values.get("gold_pass_threshold")
    threshold = _number(
        "0" if threshold in (None, "") else threshold,
        "gold_pass_threshold",
        0,
        1,
        errors,
        "A share from 0 to 1 of gold items answered right (e.g. 0.8); 0 flags nobody.",
    )
    out["gold_pass_threshold"] = float(threshold) if threshold is not None else None
    rate = values.get("hourly_rate")
    rate = _number(
        "0" if rate in (None, "") else rate, "hourly_rate", 0, 10_000, errors, "An amount per hour, e.g. 9.00."
    )
    out["hourly_rate"] = rate.quantize(Decimal("0.01")) if rate is not None else None
    out["currency"] = (_text(values.get("currency")) or "GBP").upper()
    if not re.fullmatch(r"[A-Z]{3}", out["currency"]):
        errors["currency"] = "A three-letter currency code, e.g. GBP or USD."
    if errors:
        raise SetupInvalid(errors)
    return out


@transaction.atomic
def study_create(*, project: Project, actor, **values) -> Study:
    fields = study_check(**values)
    study = Study.objects.create(project=project, token=secrets.token_urlsafe(32), created_by=actor, **fields)
    audit_record(
        action=AuditAction.STUDY_OPEN,
        actor=actor,
        project=project,
        obj=study,
        details={
            "platform": study.platform,
            "max_participants": study.max_participants,
            "tasks_per_participant": study.tasks_per_participant,
            "time_limit_minutes": study.time_limit_minutes,
            "gold_pass_threshold": study.gold_pass_threshold,
        },
    )
    return study


@transaction.atomic
def study_close(*, study: Study, actor) -> Study:
    """No new participants from now on; those who joined may finish their tasks."""
    study = Study.objects.select_for_update().select_related("project").get(pk=study.pk)
    if not study.is_open:
        raise StudyRefused("This study is closed already.")
    study.is_open = False
    study.closed_at = timezone.now()
    study.save(update_fields=["is_open", "closed_at"])
    audit_record(
        action=AuditAction.STUDY_CLOSE,
        actor=actor,
        project=study.project,
        obj=study,
        details={"participants": study.participants.count()},
    )
    return study
