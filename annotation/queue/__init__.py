"""The annotators' work queue: claim a task (one annotator's claim on one item, kept under a lease),
work on it (renew its lease, autosave a draft, skip it), submit it.

Locking rule (the same everywhere, so there are no deadlocks): lock the Item row first, then the
Task row. Claims take items with `FOR UPDATE SKIP LOCKED`, so two annotators never wait on each
other for the same item; submit, renew, skip and review wait for the item lock, so each sees the
outcome of whatever came before it. No transaction waits for an item lock while it holds another
item's (claim._claim says how the claim keeps to that). A submit that completes an item then
takes the project's marking lock, shared, to mark it (verification.py says why). The database
has the last word through its constraints: one active task per item, one annotation per item and
annotator, one annotation per annotator and idempotency key.

Modules: sql.py holds every hot-path statement (run by annotation/db.py), claim.py, task_ops.py
and submit.py the services, rules.py what they share, errors.py what the services raise, quota.py the
crowd participants' limits, gold.py the take-over that keeps one annotator's task from blocking a gold
item, progress.py where an annotator stands (every claim's answer says it).

One person, one answer per item: a crowd participant who joined two studies of a project has an
account in each, and the claim never hands one of them an item the other answered or holds
(sql.SIBLINGS).
"""

from .claim import queue_claim_for, queue_claim_next
from .errors import AlreadySubmitted, TaskConflict, TaskNotFound
from .submit import Submitted, annotation_submit
from .task_ops import task_renew, task_save_draft, task_save_draft_plain, task_skip, tasks_expire_stale

__all__ = [
    "AlreadySubmitted",
    "Submitted",
    "TaskConflict",
    "TaskNotFound",
    "annotation_submit",
    "queue_claim_for",
    "queue_claim_next",
    "task_renew",
    "task_save_draft",
    "task_save_draft_plain",
    "task_skip",
    "tasks_expire_stale",
]
