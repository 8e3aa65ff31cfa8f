"""Crowd-rater studies: a public link with quotas, a completion code and return URL,
password-less participants bound to their platform id, gold-based flags, approve / reject.

setup.py opens and closes studies; participants.py joins, finishes and decides on participants;
table.py reads the participants table and its CSV. The per-participant task quota is enforced
in the claim path (annotation/queue/quota.py)."""

from .participants import (
    FinishState,
    PlatformIdInvalid,
    PlatformIds,
    StudyUnavailable,
    completion_url,
    participant_approve,
    participant_finish,
    participant_join,
    participant_of,
    participant_reject,
    platform_ids,
)
from .setup import STUDY_FIELDS, StudyRefused, study_check, study_close, study_create
from .table import (
    finish_url_for,
    participant_rows,
    participants_csv,
    studies_of,
    study_public_path,
    study_totals,
)

__all__ = [
    "STUDY_FIELDS",
    "FinishState",
    "PlatformIdInvalid",
    "PlatformIds",
    "StudyRefused",
    "StudyUnavailable",
    "completion_url",
    "finish_url_for",
    "participant_approve",
    "participant_finish",
    "participant_join",
    "participant_of",
    "participant_reject",
    "participant_rows",
    "participants_csv",
    "platform_ids",
    "studies_of",
    "study_check",
    "study_close",
    "study_create",
    "study_public_path",
    "study_totals",
]
