"""The queue's rules that claim.py, task_ops.py and submit.py share, beside the statements of sql.py."""

from __future__ import annotations

from datetime import datetime, timedelta

from psycopg.types.numeric import Int8

from .. import db
from ..models import Item, ItemStatus, Project, Task
from ..project_setup import DEFAULT_LEASE_SECONDS, project_setting

# A page may have the task it shows plus one preloaded task active.
MAX_ACTIVE_TASKS = 2
# How many items of a partly annotated level a claim looks at first (see claim_passes).
CLAIM_WINDOW = 64

# First key of the PostgreSQL advisory lock that serializes one user's claims ("STLC"); the second is
# the user id. Claims take items with FOR UPDATE SKIP LOCKED, so two claims by one user at once (two
# tabs, a script claiming in parallel) would skip the item the other has locked and could answer
# "nothing left" while it holds the last one. Under this lock the second claim runs after the first
# committed and finds the task it took (handed back, its lease renewed). It is taken first in every claim
# transaction and by nothing else, so it adds no lock-order cycle; other users never wait on it.
CLAIM_LOCK_CLASS = 0x53544C43


CLAIM_LOCK_SQL = "SELECT pg_advisory_xact_lock(%(class)s::integer, %(user)s::integer)"


def claim_lock(*, user) -> None:
    """Serialize this user's claims until the transaction ends (see above); prepared, as the
    claim's own statement (annotation/db.py)."""
    db.rows(CLAIM_LOCK_SQL, {"class": Int8(CLAIM_LOCK_CLASS), "user": Int8(user.pk)})


def lease_seconds(project: Project) -> int:
    return project_setting(project.settings, "lease_seconds", DEFAULT_LEASE_SECONDS, project=project.slug)


def lease_until(project: Project, now: datetime) -> datetime:
    return now + timedelta(seconds=lease_seconds(project))


def item_accepts_annotations(item: Item) -> bool:
    if item.is_gold:
        return item.status == ItemStatus.PENDING
    return item.status == ItemStatus.PENDING and item.annotation_count < item.project.annotations_per_item


def claim_passes(project: Project, want_gold: bool) -> list[tuple[int, bool, int | None]]:
    """(level, gold?, window) in the order a claim tries them.

    Depth first: items closest to done first, so items reach review while the queue is long.
    Upper levels are first read through a window; level 0 never holds an item this annotator did,
    so it needs none; the upper levels are walked to their end before anyone hears "done".
    Gold items keep annotation_count at 0 (their annotations never make them done) and are
    offered only when the draw asks for it, so a finished queue stays finished.
    """
    upper = range(project.annotations_per_item - 1, 0, -1)
    passes = [(c, False, CLAIM_WINDOW) for c in upper] + [(0, False, None)] + [(c, False, None) for c in upper]
    return [(0, True, None), *passes] if want_gold else passes


def renew_active(task: Task, item: Item, now: datetime) -> Task:
    """Hand an active task the caller already has back to them, its lease renewed."""
    task.lease_expires = lease_until(item.project, now)
    task.save(update_fields=["lease_expires", "updated_at"])
    return task
