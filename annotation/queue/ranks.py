"""Queue ranks: the order items are handed out in within a queue level, for protocols that match
pairs (protocols/base.py ``matchmaking_module``, e.g. a pairwise protocol's active sampling).

Every item's ``queue_rank`` is 0 unless its protocol has a matchmaking module; the claim walks a
level by (queue_rank, id) (sql.py). After votes arrive (a submit, an import of votes) a refresh is
asked for; at most one runs per project per REFRESH_EVERY_S seconds (the first request in that
window enqueues it, later ones ride on it), so a burst of votes costs one refresh. The refresh fits
the votes so far (the protocol's module: milliseconds for a few hundred model pairs) and writes the
open items' ranks in batches, skipping items that are locked (being claimed or submitted) so it
never waits for an item lock: the locking rule of the queue (__init__.py) holds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import connection, transaction

from config.enqueue import enqueue_on_commit
from protocols import registry

from ..models import Annotation, Item, ItemStatus, Project

logger = logging.getLogger(__name__)

REFRESH_EVERY_S = 30
REFRESH_TASK = "annotation.tasks.refresh_queue_ranks"
WRITE_BATCH = 500
_PENDING_KEY = "queue-ranks:{project}"

# Ranks of one batch, written only to pending items nobody holds a lock on (SKIP LOCKED).
SET_QUEUE_RANKS_SQL = """
UPDATE annotation_item i SET queue_rank = v.rank
FROM unnest(%(ids)s::bigint[], %(ranks)s::integer[]) AS v(id, rank)
WHERE i.id = v.id AND i.queue_rank <> v.rank
  AND i.id IN (SELECT id FROM annotation_item WHERE id = ANY(%(ids)s::bigint[]) AND status = 'pending'
               FOR UPDATE SKIP LOCKED)"""


@dataclass(frozen=True)
class _Item:
    key: int
    payload: dict[str, Any]


def matches_pairs(protocol: str) -> bool:
    """Whether items of `protocol` are handed out by matchmaking ranks."""
    return registry.get(protocol).matchmaking_module is not None


def queue_ranks_refresh_soon(*, project: Project) -> bool:
    """Ask for a refresh of `project`'s ranks once the current transaction commits; True when this
    call enqueued it (False: the protocol does not match pairs, or one is asked for already)."""
    if not matches_pairs(project.protocol):
        return False
    try:
        first = cache.add(_PENDING_KEY.format(project=project.pk), 1, timeout=REFRESH_EVERY_S)
    except Exception as exc:  # the cache (Redis) is down: ranks only order work, they can wait
        logger.warning("queue ranks of project %s not refreshed (cache unavailable): %s", project.pk, exc)
        return False
    if first:
        enqueue_on_commit(REFRESH_TASK, project.pk)
    return bool(first)


def queue_ranks_refresh(*, project_id: int) -> int:
    """Rank `project`'s open items from the votes so far and write the ranks; returns how many
    items' ranks changed (0 for a protocol without matchmaking or a project gone)."""
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return 0
    module = registry.get(project.protocol).matchmaking
    if module is None:
        return 0
    rows = Item.objects.filter(project=project, is_gold=False).exclude(status=ItemStatus.DISCARDED).order_by("pk")
    items, open_keys = [], []
    for pk, payload, status in rows.values_list("pk", "payload", "status").iterator(chunk_size=2000):
        items.append(_Item(pk, payload))
        if status == ItemStatus.PENDING:
            open_keys.append(pk)
    votes: dict[int, list[tuple[str, dict]]] = {}
    answers = Annotation.objects.filter(item__project=project, item__is_gold=False).order_by("item_id", "pk")
    for item_id, annotator_id, result in answers.values_list("item_id", "annotator_id", "result").iterator(
        chunk_size=2000
    ):
        votes.setdefault(item_id, []).append((str(annotator_id), result))
    ranks = module.item_priorities(items, votes, open_keys=open_keys, seed=sum(len(v) for v in votes.values()))
    ordered = sorted(ranks.items())
    changed = 0
    for start in range(0, len(ordered), WRITE_BATCH):
        batch = ordered[start : start + WRITE_BATCH]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(SET_QUEUE_RANKS_SQL, {"ids": [pk for pk, _ in batch], "ranks": [rank for _, rank in batch]})
            changed += cursor.rowcount
    return changed
