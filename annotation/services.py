"""Write paths of the annotation work: the task queue, drafts, submits, skips and reviews.

Locking rule (the same everywhere, so there are no deadlocks): lock the Item row first, then the
Task row. Claims take items with `FOR UPDATE SKIP LOCKED`, so two annotators never wait on each
other for the same item; submit, renew, skip and review wait for the item lock, so each sees the
outcome of whatever came before it. No transaction waits for an item lock while it holds another
item's (_claim says how the claim keeps to that). The database has the last word through its
constraints: one active task per item, one annotation per item and annotator, one annotation per
annotator and idempotency key.
"""
from __future__ import annotations

import functools
import json
import random
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Aggregate, Case, Count, Exists, F, FloatField, OuterRef, Q, Value, When
from django.utils import timezone
from psycopg import RawCursor
from psycopg.types.numeric import Int8

from . import agreement
from .models import Annotation, Item, ItemStatus, Project, Review, ReviewDecision, Suggestion, Task, TaskStatus
from .results import QAContext, ResultInvalid, Validated, validate_result
from .selectors import result_context_for, shows_suggestions

DEFAULT_LEASE_SECONDS = 600
# A page may hold the task it shows plus one preloaded task.
MAX_HELD_TASKS = 2


class TaskConflict(Exception):
    """The request lost a race or is stale (HTTP 409); the message says what to do.

    `extra` goes into the response body next to the message (e.g. the newer draft version).
    """

    def __init__(self, message: str, **extra):
        super().__init__(message)
        self.extra = extra


class TaskNotFound(Exception):
    """No such task for this user (HTTP 404; other people's tasks are not revealed)."""


def lease_seconds(project: Project) -> int:
    return int(project.settings.get("lease_seconds", DEFAULT_LEASE_SECONDS))


def _lease_until(project: Project, now: datetime) -> datetime:
    return now + timedelta(seconds=lease_seconds(project))


# --- hot-path SQL -------------------------------------------------------------------------------
# Claim and submit run a few fixed statements many times a second. They go through a psycopg
# cursor with server-side binding and `prepare=True`: each statement is parsed and planned once
# per connection (planning cost more than executing the claim), and no ORM query is compiled per
# call (config/settings.py turns preparing on and makes PostgreSQL keep the generic plan: the
# right one here, index range walks and primary-key probes whatever the ids). Same connection and
# transaction as the ORM; errors are mapped to Django's (IntegrityError).
# Ids are sent as int8 so one prepared statement serves every id. Columns are listed, never `*`,
# so a migration adding a column does not break a prepared statement.

_NAMED = re.compile(r"%\((\w+)\)s")


@functools.lru_cache(maxsize=128)
def _native(sql: str) -> tuple[str, tuple[str, ...]]:
    """`%(name)s` placeholders rewritten once as PostgreSQL's own $1, $2, ... and the names in that
    order (psycopg would otherwise re-parse a long statement such as the claim on every call)."""
    names: list[str] = []

    def number(match: re.Match) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return _NAMED.sub(number, sql), tuple(names)


def _rows(sql: str, params: dict) -> list[tuple]:
    """Run one hot-path statement inside the caller's transaction; all rows."""
    query, names = _native(sql)
    connection.ensure_connection()
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors:
        with RawCursor(connection.connection) as cursor:
            cursor.execute(query, [params[name] for name in names], prepare=True)
            return cursor.fetchall()  # every hot-path statement returns rows


def _columns(model, alias: str) -> str:
    return ", ".join(f"{alias}.{f.column}" for f in model._meta.concrete_fields)


def _instance(model, values):
    """A model instance from `_columns(model, ...)` values, JSON fields decoded as the ORM does."""
    fields = model._meta.concrete_fields
    values = [f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v for f, v in zip(fields, values)]
    return model.from_db(connection.alias, [f.attname for f in fields], values)


def _ids(values) -> list[Int8]:
    return [Int8(v) for v in values]


def _item_accepts_annotations(item: Item) -> bool:
    if item.is_gold:
        return item.status == ItemStatus.PENDING
    return item.status == ItemStatus.PENDING and item.annotation_count < item.project.annotations_per_item


# --- claim ------------------------------------------------------------------------------------

# The queue is item_queue_idx: (project, status, annotation_count, id). A "level" is the items
# with one annotation count. Each level is read as a row-comparison range on that index in the
# index's own order, so only that index can serve it: the walk starts at the level's first row
# and stops at the first free one, however many items the project has, and done items are never
# read. (With plain equalities and ORDER BY id the planner may prefer the primary key and crawl
# through every done item.)
def _level(alias: str, count: int) -> str:
    c = int(count)
    return (f"({alias}.project_id, {alias}.status, {alias}.annotation_count, {alias}.id) > (%(project)s, 'pending', {c}, 0) "
            f"AND ({alias}.project_id, {alias}.status, {alias}.annotation_count) < (%(project)s, 'pending', {c + 1})")


_CLAIM_SELECT = """SELECT {columns},
       EXISTS (SELECT 1 FROM annotation_task x WHERE x.item_id = i.id AND x.status = 'active') AS held_before
FROM annotation_item i"""
_CLAIM_FILTERS = """
  AND i.is_gold = {gold}
  AND i.id <> ALL(%(passed)s::bigint[])
  AND NOT EXISTS (SELECT 1 FROM annotation_task t
                  WHERE t.item_id = i.id AND t.status = 'active' AND t.lease_expires > %(now)s)
  AND NOT EXISTS (SELECT 1 FROM annotation_annotation a
                  WHERE a.item_id = i.id AND a.annotator_id = %(user)s)
  AND NOT EXISTS (SELECT 1 FROM annotation_task s
                  WHERE s.item_id = i.id AND s.annotator_id = %(user)s AND s.status = 'skipped')"""


@functools.lru_cache(maxsize=64)
def claim_sql(count: int, window: int | None, gold: bool | None = None) -> str:
    """The claim statement for one level (gold None: the flag is the parameter %(gold)s).

    window=None walks the level to its end. window=n looks only at the level's first n items:
    partly annotated levels fill up with items this annotator already did, waiting for others,
    and the window keeps a claim from re-reading all of them every time. Both forms return rows
    in index order, so the scan stops at the first free item (no sort of the candidates).
    """
    select = _CLAIM_SELECT.format(columns=_columns(Item, "i"))
    filters = _CLAIM_FILTERS.format(gold="%(gold)s" if gold is None else ("true" if gold else "false"))
    if window is None:
        return f"""{select}
WHERE {_level("i", count)}{filters}
ORDER BY i.project_id, i.status, i.annotation_count, i.id
LIMIT 1
FOR UPDATE OF i SKIP LOCKED"""
    return f"""{select}
JOIN (SELECT w.project_id, w.status, w.annotation_count, w.id FROM annotation_item w
      WHERE {_level("w", count)}
      ORDER BY w.project_id, w.status, w.annotation_count, w.id
      LIMIT {int(window)}) win ON win.id = i.id
WHERE i.project_id = %(project)s AND i.status = 'pending' AND i.annotation_count = win.annotation_count{filters}
ORDER BY win.project_id, win.status, win.annotation_count, win.id
LIMIT 1
FOR UPDATE OF i SKIP LOCKED"""


CLAIM_WINDOW = 64

# The partial unique index (one active task per item) is the final guard against a double hold.
_INSERT_TASK_SQL = """
INSERT INTO annotation_task (item_id, annotator_id, status, lease_expires, draft, draft_version, created_at, updated_at)
VALUES (%(item)s, %(user)s, 'active', %(lease)s, '{}'::jsonb, 0, %(now)s, %(now)s)
ON CONFLICT (item_id) WHERE status = 'active' DO NOTHING
RETURNING id
"""


def claim_sql_params(*, project: Project, user_id: int, gold: bool, now: datetime, passed=()) -> dict:
    return {"project": Int8(project.pk), "gold": gold, "now": now, "user": Int8(user_id), "passed": _ids(passed)}


@functools.lru_cache(maxsize=64)
def claim_next_sql(passes: tuple[tuple[int, bool, int | None], ...]) -> str:
    """The whole claim in one statement (one round trip, planned once per connection).

    `held`: the caller's active tasks in the project. The passes are CTEs read in order through
    UNION ALL ... LIMIT 1, so a pass runs only when the ones before it found nothing, and each
    locks only the row it returns. The claim is gated on the holds: it runs only when every hold
    is one the caller shows or already dealt with (%(ignore)s) and fewer than MAX_HELD_TASKS are
    shown. `ins` creates the task; the partial unique index (one active task per item) is the final
    guard: a conflict (a lapsed hold on the item, or one renewed meanwhile) inserts nothing and the
    caller decides. One row always: the holds, the new task id (or NULL), the item (or NULLs).
    """
    ctes = ",\n".join(f"p{n} AS ({claim_sql(count, window, gold)})" for n, (count, gold, window) in enumerate(passes))
    union = " UNION ALL ".join(f"SELECT * FROM p{n}" for n in range(len(passes)))
    return f"""WITH held AS (
    SELECT t.id, t.item_id, t.created_at FROM annotation_task t JOIN annotation_item h ON h.id = t.item_id
    WHERE t.annotator_id = %(user)s AND t.status = 'active' AND h.project_id = %(project)s
),
{ctes},
cand AS (
    SELECT * FROM ({union}) u
    WHERE NOT EXISTS (SELECT 1 FROM held WHERE held.id <> ALL(%(ignore)s::bigint[]))
      AND (SELECT count(*) FROM held WHERE held.id = ANY(%(shown)s::bigint[])) < {MAX_HELD_TASKS}
    LIMIT 1
),
ins AS (
    INSERT INTO annotation_task (item_id, annotator_id, status, lease_expires, draft, draft_version, created_at, updated_at)
    SELECT cand.id, %(user)s, 'active', %(lease)s, '{{}}'::jsonb, 0, %(now)s, %(now)s FROM cand
    WHERE cand.status = 'pending' AND (cand.is_gold OR cand.annotation_count < %(needed)s)
    ON CONFLICT (item_id) WHERE status = 'active' DO NOTHING
    RETURNING id
)
SELECT (SELECT array_agg(held.id ORDER BY held.created_at, held.id) FROM held),
       (SELECT array_agg(held.item_id ORDER BY held.created_at, held.id) FROM held),
       (SELECT ins.id FROM ins),
       cand.*
FROM (SELECT 1) one LEFT JOIN cand ON true"""


def _claim_passes(project: Project, want_gold: bool) -> list[tuple[int, bool, int | None]]:
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


def _renew_held(task: Task, item: Item, now: datetime) -> Task:
    task.lease_expires = _lease_until(item.project, now)
    task.save(update_fields=["lease_expires", "updated_at"])
    return task


_AGAIN = object()


def task_claim_next(*, project: Project, user, now: datetime | None = None, exclude: tuple[int, ...] = (),
                    rng: random.Random | None = None) -> Task | None:
    """The task this user should work on now: the one they hold, else a newly claimed item.

    `exclude` lists task ids the caller already shows (a page preloading the next task); a user
    holds at most MAX_HELD_TASKS at once. Returns None when nothing is left for this user.
    """
    now = now or timezone.now()
    want_gold = (rng or random).random() < float(project.settings.get("gold_share", 0.0) or 0.0)
    ignore: list[int] = list(exclude)  # holds not to hand out again: shown by the caller, or gone
    while (task := _claim(project=project, user=user, now=now, exclude=exclude, ignore=ignore,
                          want_gold=want_gold)) is _AGAIN:
        pass
    return task


@transaction.atomic
def _claim(*, project: Project, user, now: datetime, exclude: tuple[int, ...], ignore: list[int],
           want_gold: bool):
    """One transaction of task_claim_next; _AGAIN when it must commit and start over.

    The held-task path waits for an item lock. It does so only while this transaction holds no
    other item lock: otherwise two claims (two tabs, or a claim and a submit) could each hold one
    item and wait for the other's. When a second wait would be needed, what was done so far (holds
    found gone or expired) is committed, which releases every lock, and a fresh transaction goes on.
    """
    if connection.vendor != "postgresql":
        return _claim_portable(project=project, user=user, now=now, exclude=exclude, ignore=ignore, want_gold=want_gold)
    passes = tuple(_claim_passes(project, want_gold))
    lease = _lease_until(project, now)
    passed: list[int] = []  # items locked but not claimable
    holds_item_locks = False
    while True:
        (row,) = _rows(claim_next_sql(passes), {
            "project": Int8(project.pk), "user": Int8(user.pk), "now": now, "lease": lease,
            "needed": project.annotations_per_item, "passed": _ids(passed), "ignore": _ids(ignore),
            "shown": _ids(exclude),
        })
        held_ids, held_items, task_pk, *item_row = row
        held = [(t, i) for t, i in zip(held_ids or (), held_items or ()) if t not in ignore]
        if held:
            # The caller holds a task it does not show (a reload, a second tab): hand that back.
            for task_pk, item_pk in held:
                if holds_item_locks:
                    return _AGAIN
                ignore.append(task_pk)
                holds_item_locks = True
                item = Item.objects.select_for_update().get(pk=item_pk)
                item.project = project
                task = Task.objects.select_for_update().get(pk=task_pk)
                if task.status != TaskStatus.ACTIVE:  # reclaimed by someone while we waited
                    continue
                if not _item_accepts_annotations(item):  # a reviewer settled the item meanwhile
                    task.status = TaskStatus.EXPIRED
                    task.save(update_fields=["status", "updated_at"])
                    continue
                task.item = item
                return _renew_held(task, item, now)
            continue  # none of them stands: claim (the statement now ignores them)
        if item_row[0] is None:  # nothing left, or the caller already shows MAX_HELD_TASKS
            return None
        item, held_before = _instance(Item, item_row[:-1]), item_row[-1]
        item.project = project
        holds_item_locks = True  # the statement locked this item
        if task_pk is None:
            if not (held_before and _item_accepts_annotations(item)):
                passed.append(item.pk)  # changed or renewed between our snapshot and our lock
                continue
            # Lazy reclaim: a hold whose lease ran out gives the item back to the queue.
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE annotation_task SET status = 'expired', updated_at = %s "
                    "WHERE item_id = %s AND status = 'active' AND lease_expires <= %s",
                    [now, item.pk, now],
                )
                cursor.execute(_INSERT_TASK_SQL, {"item": item.pk, "user": user.pk, "lease": lease, "now": now})
                inserted = cursor.fetchone()
            if inserted is None:  # renewed by its holder between our snapshot and our lock
                passed.append(item.pk)
                continue
            task_pk = inserted[0]
        task = Task(pk=task_pk, item=item, annotator=user, status=TaskStatus.ACTIVE, lease_expires=lease,
                    draft={}, draft_version=0, created_at=now, updated_at=now)
        task._state.adding = False
        return task


# The embedded SQLite of the one-command demo has neither row locks nor the statements above; it
# serializes writers instead. The same rules through the ORM, for the demo only (tests and
# production run PostgreSQL; tests/annotation/test_demo_sqlite.py drives this path).
def _claim_portable(*, project: Project, user, now: datetime, exclude: tuple[int, ...], ignore: list[int],
                    want_gold: bool):
    held = list(Task.objects.filter(annotator=user, status=TaskStatus.ACTIVE, item__project=project)
                .order_by("created_at", "pk").values_list("pk", "item_id"))
    for task_pk, item_pk in held:
        if task_pk in ignore:
            continue
        ignore.append(task_pk)
        item = Item.objects.get(pk=item_pk)
        item.project = project
        task = Task.objects.get(pk=task_pk)
        if not _item_accepts_annotations(item):
            task.status = TaskStatus.EXPIRED
            task.save(update_fields=["status", "updated_at"])
            continue
        task.item = item
        return _renew_held(task, item, now)
    if sum(1 for task_pk, _ in held if task_pk in exclude) >= MAX_HELD_TASKS:
        return None
    lease = _lease_until(project, now)
    active = Task.objects.filter(item=OuterRef("pk"), status=TaskStatus.ACTIVE, lease_expires__gt=now)
    mine = Annotation.objects.filter(item=OuterRef("pk"), annotator=user)
    skipped = Task.objects.filter(item=OuterRef("pk"), annotator=user, status=TaskStatus.SKIPPED)
    passed: list[int] = []
    while True:
        for count, gold, window in _claim_passes(project, want_gold):
            level = Item.objects.filter(project=project, status=ItemStatus.PENDING, annotation_count=count, is_gold=gold)
            if window is not None:
                level = Item.objects.filter(pk__in=list(level.order_by("pk").values_list("pk", flat=True)[:window]))
            item = (level.exclude(pk__in=passed).exclude(Exists(active)).exclude(Exists(mine)).exclude(Exists(skipped))
                    .order_by("pk").first())
            if item is not None:
                break
        else:
            return None
        item.project = project
        try:
            with transaction.atomic():
                Task.objects.filter(item=item, status=TaskStatus.ACTIVE, lease_expires__lte=now).update(
                    status=TaskStatus.EXPIRED, updated_at=now)
                return Task.objects.create(item=item, annotator=user, status=TaskStatus.ACTIVE, lease_expires=lease,
                                           draft={}, draft_version=0)
        except IntegrityError:  # held meanwhile (the one-active-task-per-item constraint)
            passed.append(item.pk)


def _prior_ids_portable(item_id: int, user, key: str | None) -> list[int]:
    mine = Q(item_id=item_id, annotator=user)
    if key is not None:
        mine |= Q(annotator=user, idempotency_key=key)
    return list(Annotation.objects.filter(mine).order_by("pk").values_list("pk", flat=True))


def _store_portable(*, item: Item, user, task: Task, result: dict, ms: int, key: str | None, now: datetime,
                    needed: int, suggestable: bool) -> tuple[int, int | None, str | None, bool]:
    suggested = suggestable and Suggestion.objects.filter(item=item, created_at__lte=now).exists()
    annotation = Annotation.objects.create(item=item, annotator=user, external_rater="", task=task, result=result,
                                           time_spent_ms=ms, idempotency_key=key, source="task",
                                           with_suggestion=suggested)
    Task.objects.filter(pk=task.pk).update(status=TaskStatus.SUBMITTED, updated_at=now)
    if item.is_gold:
        return annotation.pk, None, None, suggested
    Item.objects.filter(pk=item.pk).update(
        annotation_count=F("annotation_count") + 1, updated_at=now,
        status=Case(When(annotation_count__gte=needed - 1, then=Value(str(ItemStatus.ANNOTATED))), default=F("status")))
    count, status = Item.objects.filter(pk=item.pk).values_list("annotation_count", "status").get()
    return annotation.pk, count, status, suggested


# --- holding a task ---------------------------------------------------------------------------

# Lock the item of the caller's own task (with its project), then the task: one statement, one
# round trip. The item is locked inside `it`, which the outer join must read before it can lock
# the task, so the global lock order holds. Both rows come back in their latest committed
# version (READ COMMITTED re-reads a row it had to wait for). `prior_ids` (this annotator's
# annotation of the item, or their annotation stored under the same Idempotency-Key: what makes
# a submit a repeat) is read with the statement's snapshot, taken before any wait for the item
# lock, so it can miss an annotation committed by the submit we waited for; the unique constraints catch that
# case and task_submit then runs again (see there).
_LOCK_OWN_TASK_SQL = f"""
WITH it AS (
    SELECT {_columns(Item, "i")}, {", ".join(f"p.{f.column} AS p_{f.column}" for f in Project._meta.concrete_fields)}
    FROM annotation_item i JOIN annotation_project p ON p.id = i.project_id
    WHERE i.id = (SELECT o.item_id FROM annotation_task o WHERE o.id = %(task)s AND o.annotator_id = %(user)s)
    FOR UPDATE OF i
)
SELECT it.*, {_columns(Task, "t")},
       ARRAY(SELECT a.id FROM annotation_annotation a
             WHERE (a.item_id = t.item_id AND a.annotator_id = t.annotator_id)
                OR (a.annotator_id = t.annotator_id AND a.idempotency_key = %(key)s::text)
             ORDER BY a.id) AS prior_ids
FROM it JOIN annotation_task t ON t.id = %(task)s AND t.item_id = it.id
FOR UPDATE OF t
"""
_PRIOR_IDS_SQL = """
SELECT ARRAY(SELECT a.id FROM annotation_annotation a
             WHERE (a.item_id = %(item)s AND a.annotator_id = %(user)s)
                OR (a.annotator_id = %(user)s AND a.idempotency_key = %(key)s::text)
             ORDER BY a.id)
"""
_N_ITEM_COLUMNS = len(Item._meta.concrete_fields)
_N_PROJECT_COLUMNS = len(Project._meta.concrete_fields)


def _lock_own_task(task_id: int, user, *, idempotency_key: str | None = None) -> tuple[Task, Item]:
    """Lock the task's item, then the task (the global lock order); 404 for other people's tasks."""
    if connection.vendor != "postgresql":
        task = Task.objects.select_related("item__project").filter(pk=task_id, annotator=user).first()
        if task is None:
            raise TaskNotFound("No such task.")
        task.prior_ids = _prior_ids_portable(task.item_id, user, idempotency_key)
        return task, task.item
    rows = _rows(_LOCK_OWN_TASK_SQL, {"task": Int8(task_id), "user": Int8(user.pk), "key": idempotency_key})
    if not rows:
        raise TaskNotFound("No such task.")
    (row,) = rows
    n, m = _N_ITEM_COLUMNS, _N_ITEM_COLUMNS + _N_PROJECT_COLUMNS
    item = _instance(Item, row[:n])
    item.project = _instance(Project, row[n:m])
    task = _instance(Task, row[m:-1])
    task.prior_ids = row[-1]
    task.item = item
    return task, item


def _keep_hold(task: Task, item: Item, now: datetime) -> None:
    """Extend the lease; an expired hold comes back if nobody took the item meanwhile."""
    if task.status == TaskStatus.ACTIVE:
        task.lease_expires = _lease_until(item.project, now)
        return
    if task.status == TaskStatus.EXPIRED:
        taken = Task.objects.filter(item=item, status=TaskStatus.ACTIVE).exclude(pk=task.pk).exists()
        if not taken and _item_accepts_annotations(item):
            task.status = TaskStatus.ACTIVE
            task.lease_expires = _lease_until(item.project, now)
            return
        raise TaskConflict("Your hold on this task expired and the item went to someone else. Your draft is kept "
                           "on this task, but it can no longer be submitted; load the next task.")
    if task.status == TaskStatus.SUBMITTED:
        raise TaskConflict("This task was already submitted.")
    raise TaskConflict("You skipped this task; load the next one.")


@transaction.atomic
def task_renew(*, task_id: int, user, now: datetime | None = None) -> Task:
    now = now or timezone.now()
    task, item = _lock_own_task(task_id, user)
    _keep_hold(task, item, now)
    task.save(update_fields=["status", "lease_expires", "updated_at"])
    return task


@transaction.atomic
def task_save_draft(*, task_id: int, user, draft: dict, version: int, now: datetime | None = None) -> Task:
    """Autosave. `version` is the draft version the client last saw; the save makes it version + 1.

    A stale version gets TaskConflict, except a replay of the save that made the current version
    (same draft at version + 1), which returns the task unchanged.
    """
    now = now or timezone.now()
    task, item = _lock_own_task(task_id, user)
    if version + 1 == task.draft_version and json.loads(json.dumps(draft)) == task.draft:
        # The same save replayed (a client retry after the first one committed but its answer
        # was lost): answer as the first time did, keeping the hold as any save does.
        if task.status == TaskStatus.ACTIVE:
            _keep_hold(task, item, now)
            task.save(update_fields=["lease_expires", "updated_at"])
        return task
    if version != task.draft_version:
        raise TaskConflict(
            f"This draft was saved from another tab or window in the meantime (version {task.draft_version}, "
            f"yours is based on version {version}). Reload the task to continue from the latest draft.",
            version=task.draft_version, draft=task.draft,
        )
    _keep_hold(task, item, now)
    task.draft = draft
    task.draft_version += 1
    task.save(update_fields=["status", "lease_expires", "draft", "draft_version", "updated_at"])
    return task


@transaction.atomic
def task_skip(*, task_id: int, user) -> Task:
    task, _item = _lock_own_task(task_id, user)
    if task.status == TaskStatus.SKIPPED:
        return task
    if task.status == TaskStatus.SUBMITTED:
        raise TaskConflict("This task was already submitted; it cannot be skipped.")
    task.status = TaskStatus.SKIPPED
    task.save(update_fields=["status", "updated_at"])
    return task


@transaction.atomic
def task_expire_stale(*, now: datetime | None = None) -> int:
    """Mark every hold whose lease ran out as expired (claims also do this lazily per item)."""
    now = now or timezone.now()
    return Task.objects.filter(status=TaskStatus.ACTIVE, lease_expires__lte=now).update(
        status=TaskStatus.EXPIRED, updated_at=now
    )


# --- submit -----------------------------------------------------------------------------------

@dataclass
class Submitted:
    annotation: Annotation
    created: bool
    warnings: dict[str, str] = field(default_factory=dict)


def _warnings_for(workflow: str, result: dict) -> dict[str, str]:
    if workflow == "quintuplet":
        from .results import quintuplet_warnings

        return quintuplet_warnings(result)
    return {}


def _repeat(annotation: Annotation, workflow: str) -> Submitted:
    return Submitted(annotation, False, _warnings_for(workflow, annotation.result))


def _same_result(workflow: str, item: Item, result, stored: dict) -> bool:
    """Whether a repeated submit carries the answer already stored (compared after validation,
    which normalizes, e.g. clips boxes; as stored JSON, so tuples and lists compare equal)."""
    try:
        validated = validate_result(workflow, result, result_context_for(item=item))
    except ResultInvalid:
        return False
    return json.loads(json.dumps(validated.result)) == stored


class AlreadySubmitted(TaskConflict):
    """This annotator already submitted the item with a different answer (HTTP 409); the stored
    annotation goes into the response body so the page can show what was kept."""

    def __init__(self, annotation: Annotation):
        super().__init__("This task was already submitted with a different answer (from another tab or window, or "
                         "an earlier submit). The first answer is kept; yours was not saved.")
        self.annotation = annotation


def task_submit(*, task_id: int, user, result: dict, time_spent_ms: int = 0, idempotency_key: str | None = None,
                now: datetime | None = None) -> Submitted:
    """Store the annotation of a held task, exactly once.

    A repeat (same key, same task, or a second tab) with the same answer returns the first
    annotation with created=False; with a different answer it raises AlreadySubmitted (nothing
    changes). Idempotency keys are per annotator. Raises ResultInvalid (nothing written),
    TaskNotFound or TaskConflict.
    """
    kwargs = dict(task_id=task_id, user=user, result=result, time_spent_ms=time_spent_ms,
                  idempotency_key=(idempotency_key or "").strip() or None, now=now or timezone.now())
    try:
        return _task_submit(**kwargs)
    except IntegrityError:
        pass
    # The first try lost a race its snapshot could not see (a concurrent submit of the same task,
    # e.g. a double click, committed while we waited for the item lock): nothing was written, and
    # a second try sees that submit and returns it as the repeat.
    try:
        return _task_submit(**kwargs)
    except IntegrityError:
        # Only an Idempotency-Key sent with another item's submit can get here: the item lock and
        # the checks rule out every other unique violation.
        raise TaskConflict("This Idempotency-Key was already used for another submission.")


# Store the annotation, mark the task submitted and count the annotation in one round trip (three
# different tables, so the order of the CTEs does not matter); gold items are never counted.
_STORE_SQL = """
WITH stored AS (
    INSERT INTO annotation_annotation (item_id, annotator_id, external_rater, task_id, result, time_spent_ms,
                                       idempotency_key, source, with_suggestion, created_at)
    VALUES (%(item)s, %(user)s, '', %(task)s, %(result)s::jsonb, %(ms)s, %(key)s::text, 'task',
            %(suggestable)s::boolean AND EXISTS (SELECT 1 FROM annotation_suggestion s
                                        WHERE s.item_id = %(item)s AND s.created_at <= %(now)s),
            %(now)s)
    RETURNING id, with_suggestion
), submitted AS (
    UPDATE annotation_task SET status = 'submitted', updated_at = %(now)s WHERE id = %(task)s
), counted AS (
    UPDATE annotation_item
    SET annotation_count = annotation_count + 1,
        status = CASE WHEN annotation_count + 1 >= %(needed)s THEN 'annotated' ELSE status END,
        updated_at = %(now)s
    WHERE id = %(item)s AND NOT is_gold
    RETURNING annotation_count, status
)
SELECT stored.id, counted.annotation_count, counted.status, stored.with_suggestion FROM stored LEFT JOIN counted ON true
"""


@transaction.atomic
def _task_submit(*, task_id: int, user, result: dict, time_spent_ms: int, idempotency_key: str | None,
                 now: datetime) -> Submitted:
    key = idempotency_key
    task, item = _lock_own_task(task_id, user, idempotency_key=key)
    project = item.project
    workflow = project.workflow
    if not task.prior_ids and not (task.status == TaskStatus.ACTIVE and task.lease_expires > now
                                   and _item_accepts_annotations(item)):
        # Off the plain path (e.g. the task was submitted while we waited for the lock): read the
        # earlier annotations again with a snapshot taken now, so a repeat is answered as one.
        if connection.vendor != "postgresql":
            task.prior_ids = _prior_ids_portable(item.pk, user, key)
        else:
            ((task.prior_ids,),) = _rows(_PRIOR_IDS_SQL, {"item": Int8(item.pk), "user": Int8(user.pk), "key": key})
    if task.prior_ids:
        priors = list(Annotation.objects.filter(pk__in=task.prior_ids).order_by("pk"))
        for prior in priors:
            if key and prior.idempotency_key == key and prior.item_id != item.pk:
                raise TaskConflict("This Idempotency-Key was already used for another submission.")
        (stored,) = [prior for prior in priors if prior.item_id == item.pk]
        # A retry with the same key, a double click or a second tab sending the same answer gets the
        # first annotation back. A different answer is not dropped silently: 409 with the stored one.
        if _same_result(workflow, item, result, stored.result):
            return _repeat(stored, workflow)
        raise AlreadySubmitted(stored)

    validated: Validated = validate_result(workflow, result, result_context_for(item=item))

    if task.status == TaskStatus.SKIPPED:
        raise TaskConflict("You skipped this task; load the next one.")
    if task.status == TaskStatus.EXPIRED or task.lease_expires <= now:
        if Task.objects.filter(item=item, status=TaskStatus.ACTIVE).exclude(pk=task.pk).exists():
            raise TaskConflict("Your hold on this task expired and another annotator took the item, so this answer "
                               "was not saved. Load the next task.")
    if not _item_accepts_annotations(item):
        raise TaskConflict("This item already has all the annotations it needs; your answer was not saved.")

    ms = max(0, int(time_spent_ms or 0))
    # The answer is blind unless the form offered a model suggestion for this item (conservative:
    # any suggestion stored by the time of the submit counts as seen).
    suggestable = shows_suggestions(project=project)
    if connection.vendor != "postgresql":
        annotation_id, count, status, suggested = _store_portable(
            item=item, user=user, task=task, result=validated.result, ms=ms, key=key, now=now,
            needed=project.annotations_per_item, suggestable=suggestable)
    else:
        ((annotation_id, count, status, suggested),) = _rows(_STORE_SQL, {
            "item": Int8(item.pk), "user": Int8(user.pk), "task": Int8(task.pk), "result": json.dumps(validated.result),
            "ms": ms, "key": key, "now": now, "needed": project.annotations_per_item, "suggestable": suggestable})
    annotation = Annotation(pk=annotation_id, item=item, annotator=user, task=task, result=validated.result,
                            time_spent_ms=ms, idempotency_key=key, source="task", with_suggestion=suggested,
                            created_at=now)
    annotation._state.adding = False
    task.status = TaskStatus.SUBMITTED
    if not item.is_gold:
        item.annotation_count, item.status = count, status
        if item.status == ItemStatus.ANNOTATED and project.settings.get("auto_verify"):
            _auto_verify(item)
    return Submitted(annotation, True, validated.warnings)


def _auto_verify(item: Item) -> None:
    workflow = item.project.workflow
    annotations = Annotation.objects.filter(item=item)
    if workflow == "qa" and annotations.filter(with_suggestion=True).exists():
        return  # annotators agreeing on a pre-filled model answer is no blind consensus: a reviewer decides
    results = list(annotations.order_by("pk").values_list("result", flat=True))
    if not agreement.results_agree(workflow, results):
        return
    merged = agreement.consensus_result(workflow, results)
    item.payload = apply_result_to_payload(workflow, item.payload, merged, protocol=item.project.protocol)
    item.status = ItemStatus.VERIFIED
    item.save(update_fields=["payload", "status", "updated_at"])
    Review.objects.create(item=item, reviewer=None, decision=ReviewDecision.AUTO, result=merged,
                          comment="Annotators agree.")


# --- review -----------------------------------------------------------------------------------

def apply_result_to_payload(workflow: str, payload: dict, result: dict, *, protocol: str | None = None) -> dict:
    """The item payload after a reviewer (or agreeing annotators) settled its answer, in the
    import format (so a verified item exports and re-imports as it is)."""
    out = dict(payload or {})
    if workflow == "quintuplet":
        for name in agreement.QUINTUPLET_FIELDS:
            out[name] = result[name]
    elif workflow == "box":
        # The import format (PROTOCOLS.md, importing/formats.py) keeps both kinds of answer in
        # `bbox`: a box, or "nothing_to_label" / "cannot_determine", so a verified item exports
        # and re-imports as it is. ("outcome" is only the annotation result's key.)
        out.pop("outcome", None)
        if "bbox" in result:
            out["bbox"] = result["bbox"]
            out["state"] = result["state"]
        else:
            out["bbox"] = result["outcome"]
    elif workflow == "qa":
        for name in ("question", "options"):
            if name in result:
                out[name] = result[name]
        out["answer"] = result["answer"]
        if protocol == "m3verse" and isinstance(out["answer"], str):
            out["answer"] = [out["answer"]]  # M3-Verse answers are lists of letters, one correct option too
    # Ratings stay as annotations: the item payload carries no answer.
    return out


def _validate_review_edit(item: Item, result) -> dict:
    workflow = item.project.workflow
    if not isinstance(result, dict):
        raise ResultInvalid({"result": "An edit needs the merged result as a JSON object."})
    if workflow == "qa":
        errors: dict[str, str] = {}
        fixes: dict = {}
        if "question" in result:
            if not isinstance(result["question"], str) or not result["question"].strip():
                errors["question"] = "The question cannot be empty."
            else:
                fixes["question"] = result["question"].strip()
        if "options" in result:
            opts = result["options"]
            if not isinstance(opts, list) or len(opts) < 2 or not all(isinstance(o, str) and o.strip() for o in opts):
                errors["options"] = "Give at least two non-empty options."
            else:
                fixes["options"] = [o.strip() for o in opts]
        if errors:
            raise ResultInvalid(errors)
        base = result_context_for(item=item)
        n_options = len(fixes.get("options", item.payload.get("options") or []))
        ctx = QAContext(format=base.format, n_options=n_options,
                        multiple=base.multiple or item.project.protocol == "m3verse")
        answer_part = {k: v for k, v in result.items() if k in ("answer", "flags")}
        clean = validate_result("qa", answer_part, ctx).result
        if clean["answer"] is None:
            raise ResultInvalid({"answer": "A verified item needs an answer."})
        if item.project.protocol == "m3verse" and not isinstance(clean["answer"], list):
            clean["answer"] = [clean["answer"]]
        return {**fixes, "answer": clean["answer"]}
    if workflow == "box":
        from .results import BoxContext

        base = result_context_for(item=item)
        extra = (result.get("state"),) if isinstance(result.get("state"), str) and result["state"].strip() else ()
        return validate_result("box", result, BoxContext(base.width, base.height, base.labels + extra)).result
    return validate_result(workflow, result, result_context_for(item=item)).result


@transaction.atomic
def review_decide(*, item_id: int, reviewer, decision: str, annotation_id: int | None = None,
                  result: dict | None = None, comment: str = "") -> Review:
    """Settle an annotated item: accept one annotation, save an edited answer, or discard.

    The item row lock makes a second reviewer wait and then get TaskConflict. Raises
    ResultInvalid for a bad decision/annotation/result (nothing written).
    """
    item = Item.objects.select_for_update().select_related("project").filter(pk=item_id).first()
    if item is None:
        raise TaskNotFound("No such item.")
    if item.status != ItemStatus.ANNOTATED:
        if item.status in (ItemStatus.VERIFIED, ItemStatus.DISCARDED):
            last = item.reviews.order_by("-created_at").select_related("reviewer").first()
            who = f" by {last.reviewer.username}" if last and last.reviewer else ""
            raise TaskConflict(f"This item was already reviewed{who}: it is {item.status}.")
        raise TaskConflict("This item is still waiting for annotations.")
    workflow = item.project.workflow
    accepted = None
    applied: dict = {}
    if decision == ReviewDecision.ACCEPT:
        accepted = Annotation.objects.filter(pk=annotation_id, item=item).first() if annotation_id else None
        if accepted is None:
            raise ResultInvalid({"annotation": "Choose one of this item's annotations to accept."})
        applied = dict(accepted.result)
        if workflow == "qa":
            if applied.get("answer") is None:
                raise ResultInvalid({"annotation": "This annotation has no answer; edit the answer instead."})
            applied = {"answer": applied["answer"]}
        item.payload = apply_result_to_payload(workflow, item.payload, applied, protocol=item.project.protocol)
        item.status = ItemStatus.VERIFIED
    elif decision == ReviewDecision.EDIT:
        applied = _validate_review_edit(item, result)
        item.payload = apply_result_to_payload(workflow, item.payload, applied, protocol=item.project.protocol)
        item.status = ItemStatus.VERIFIED
    elif decision == ReviewDecision.DISCARD:
        item.status = ItemStatus.DISCARDED
    else:
        raise ResultInvalid({"decision": "Choose accept, edit or discard."})
    item.save(update_fields=["payload", "status", "updated_at"])
    return Review.objects.create(item=item, reviewer=reviewer, decision=decision, accepted_annotation=accepted,
                                 result=applied, comment=(comment or "")[:5000])


# --- progress and agreement figures -------------------------------------------------------------
# Read-only aggregates behind the agreement page (selectors.project_agreement). The big counts are
# computed by PostgreSQL; the agreement statistics stream annotations item by item through
# agreement.ProjectAgreement, so a request never holds a project's annotations in memory.

class _Median(Aggregate):
    function = "percentile_cont"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def project_item_counts(*, project: Project) -> dict:
    """Items per status, not counting gold items, and the number of gold items apart: a gold item
    stays pending for good (every annotator may get it), so counting it would keep progress from
    ever finishing."""
    counts = {s: 0 for s in ItemStatus.values}
    gold = 0
    rows = Item.objects.filter(project=project).values_list("status", "is_gold").annotate(n=Count("id")).order_by()
    for status, is_gold, n in rows:
        if is_gold:
            gold += n
        else:
            counts[status] = n
    return {"status_counts": counts, "gold_items": gold}


def _annotator_name(username: str | None, rater: str) -> str:
    return username or rater


def project_agreement_figures(*, project: Project, chunk_size: int = 5000) -> dict:
    """Progress and agreement of a project: items per status (gold apart), per annotator
    (annotations and median time from SQL, gold accuracy, pairwise agreement) and per workflow."""
    workflow = project.workflow
    annotations = Annotation.objects.filter(item__project=project)
    if connection.vendor == "postgresql":
        workload = (annotations.values_list("annotator__username", "external_rater")
                    .annotate(n=Count("id"), median_ms=_Median("time_spent_ms")).order_by())
    else:  # the SQLite demo has no percentile_cont: medians in Python
        spent: dict[tuple, list[int]] = {}
        for username, rater, ms in annotations.values_list("annotator__username", "external_rater", "time_spent_ms").iterator():
            spent.setdefault((username, rater), []).append(ms or 0)
        workload = [(u, r, len(v), float(statistics.median(v))) for (u, r), v in spent.items()]

    figures = agreement.ProjectAgreement(workflow)
    verified = str(ItemStatus.VERIFIED)
    columns = ["item_id", "annotator__username", "external_rater", "result", "item__status"]
    if workflow == "qa":
        columns.append("item__payload__answer")
    scored = annotations.filter(item__is_gold=False)
    left_out = 0
    if workflow == "qa":
        # Blind figures: an answer given with a model suggestion on the form is not blind.
        left_out = scored.filter(with_suggestion=True).count()
        scored = scored.filter(with_suggestion=False)
    rows = (scored.order_by("item_id", "pk").values_list(*columns)
            .iterator(chunk_size=chunk_size))
    for _item_id, entries in agreement.group_by_item(rows):
        pairs = [(_annotator_name(e[1], e[2]), e[3]) for e in entries]
        if workflow == "qa" and entries[0][4] == verified:
            figures.add_item(pairs, truth=entries[0][5])
        else:
            figures.add_item(pairs)

    gold: dict[str, list[bool]] = {}
    gold_rows = (annotations.filter(item__is_gold=True)
                 .values_list("annotator__username", "external_rater", "result", "item__payload")
                 .iterator(chunk_size=chunk_size))
    for username, rater, result, payload in gold_rows:
        ok = agreement.gold_correct(workflow, payload, result)
        if ok is not None:
            gold.setdefault(_annotator_name(username, rater), []).append(ok)

    annotators = []
    for username, rater, n, median_ms in sorted(workload, key=lambda row: _annotator_name(row[0], row[1])):
        who = _annotator_name(username, rater)
        marks = gold.get(who, [])
        mean, pairs = figures.annotator_agreement(who)
        annotators.append({
            "annotator": who,
            "annotations": n,
            "median_seconds": None if median_ms is None else round(median_ms / 1000, 3),
            "gold_items": len(marks),
            "gold_accuracy": round(sum(marks) / len(marks), 4) if marks else None,
            "agreement": mean,
            "pairs": pairs,
        })
    summary = figures.summary()
    if workflow == "qa":
        summary["truth"] = "verified items only"
        summary["answers_with_suggestion_left_out"] = left_out
    summary["kind"] = str(workflow)
    counts = project_item_counts(project=project)
    return {
        "project": project.slug,
        "annotations_per_item": project.annotations_per_item,
        "status_counts": counts["status_counts"],
        "gold_items": counts["gold_items"],
        "annotators": annotators,
        "workflow": summary,
    }
