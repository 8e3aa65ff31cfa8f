"""Every statement of the queue's hot path, and the functions that build them.

Claim and submit run a few fixed statements many times a second; annotation/db.py runs them as
prepared statements (why, and the rules they keep: ids as int8, columns listed, never `*`).
"""

from __future__ import annotations

import functools
from datetime import datetime

from psycopg.types.numeric import Int8

from ..models import ROLE_RANK, Item, Project, Role, Task
from ..setting_rules import DEFAULT_LEASE_SECONDS, LEASE_RANGE
from .progress import PROGRESS_PARTS
from .rules import CLAIM_LOCK_CLASS, MAX_ACTIVE_TASKS


def columns(model, alias: str) -> str:
    """The model's concrete columns in order (db.instance reads a row of them back)."""
    return ", ".join(f"{alias}.{f.column}" for f in model._meta.concrete_fields)


def ids(values) -> list[Int8]:
    return [Int8(v) for v in values]


def role_sql(project: str) -> str:
    """The caller's (%(user)s) role in the project whose id is `project`, an SQL expression, read
    as annotation/permissions.py reads it (_project_statement: a crowd account is an annotator of
    its study's project and nothing else); NULL for none."""
    annotator = Role.ANNOTATOR.value
    return f"""(SELECT CASE WHEN c.id IS NULL THEN m.role WHEN s.project_id = {project} THEN '{annotator}' END
        FROM annotation_membership m
        LEFT JOIN annotation_crowdaccount c ON c.user_id = m.user_id
        LEFT JOIN annotation_study s ON s.id = c.study_id
        WHERE m.project_id = {project} AND m.user_id = %(user)s
        LIMIT 1)"""


# --- claim ------------------------------------------------------------------------------------


# The queue is item_queue_idx: (project, status, annotation_count, queue_rank, id). A "level" is
# the items with one annotation count; within a level items go by queue_rank (0 for all unless the
# protocol matches pairs, ranks.py), then id. Each level is read as a row-comparison range on that index in the
# index's own order, so only that index can serve it: the walk starts at the level's first row
# and stops at the first free one, however many items the project has, and done items are never
# read. (With plain equalities and ORDER BY id the planner may prefer the primary key and crawl
# through every done item.)
RANK_MIN = -(2**31)  # the smallest queue_rank (an integer column): every rank of a level is above it


def _level(alias: str, count: int) -> str:
    c = int(count)
    return (
        f"({alias}.project_id, {alias}.status, {alias}.annotation_count, {alias}.queue_rank, {alias}.id) "
        f"> (%(project)s, 'pending', {c}, {RANK_MIN}, 0) "
        f"AND ({alias}.project_id, {alias}.status, {alias}.annotation_count) < (%(project)s, 'pending', {c + 1})"
    )


CLAIM_SELECT = """SELECT {columns},
       EXISTS (SELECT 1 FROM annotation_task x WHERE x.item_id = i.id AND x.status = 'active') AS active_before
FROM annotation_item i"""
# A crowd participant's other accounts in this project: one crowd account per study (annotation/
# studies/models.py, CrowdAccount), so the same platform id in two studies of one project is two
# users. An item one of them answered or holds is not handed to another (the same person would
# answer it twice). An uncorrelated subquery: PostgreSQL runs it once per statement (an InitPlan),
# one probe of the crowd account's user index that finds nothing for everyone but crowd accounts.
# "Holds" counts expired tasks too: an expired task is still taken by submit while nobody else
# holds its item (submit.py).
SIBLINGS = """ARRAY(SELECT c2.user_id FROM annotation_crowdaccount c1
             JOIN annotation_study s2 ON s2.project_id = %(project)s
             JOIN annotation_crowdaccount c2 ON c2.study_id = s2.id AND c2.platform = c1.platform
                                             AND c2.external_id = c1.external_id
             WHERE c1.user_id = %(user)s AND c2.user_id <> c1.user_id)"""
CLAIM_FILTERS = f"""
  AND i.is_gold = {{gold}}
  AND i.id <> ALL(%(passed)s::bigint[])
  AND NOT EXISTS (SELECT 1 FROM annotation_task t
                  WHERE t.item_id = i.id AND t.status = 'active' AND t.lease_expires > %(now)s)
  AND NOT EXISTS (SELECT 1 FROM annotation_annotation a
                  WHERE a.item_id = i.id AND a.annotator_id = %(user)s)
  AND NOT EXISTS (SELECT 1 FROM annotation_task s
                  WHERE s.item_id = i.id AND s.annotator_id = %(user)s AND s.status = 'skipped')
  AND NOT EXISTS (SELECT 1 FROM annotation_annotation sa
                  WHERE sa.item_id = i.id AND sa.annotator_id = ANY({SIBLINGS}))
  AND NOT EXISTS (SELECT 1 FROM annotation_task st
                  WHERE st.item_id = i.id AND st.annotator_id = ANY({SIBLINGS})
                    AND st.status IN ('active', 'expired'))"""


@functools.lru_cache(maxsize=64)
def claim_sql(count: int, window: int | None, gold: bool | None = None) -> str:
    """The claim statement for one level (gold None: the flag is the parameter %(gold)s).

    window=None walks the level to its end. window=n looks only at the level's first n items:
    partly annotated levels fill up with items this annotator already did, waiting for others,
    and the window keeps a claim from re-reading all of them every time. Both forms return rows
    in index order, so the scan stops at the first free item (no sort of the candidates).
    """
    select = CLAIM_SELECT.format(columns=columns(Item, "i"))
    filters = CLAIM_FILTERS.format(gold="%(gold)s" if gold is None else ("true" if gold else "false"))
    if window is None:
        return f"""{select}
WHERE {_level("i", count)}{filters}
ORDER BY i.project_id, i.status, i.annotation_count, i.queue_rank, i.id
LIMIT 1
FOR UPDATE OF i SKIP LOCKED"""
    return f"""{select}
JOIN (SELECT w.project_id, w.status, w.annotation_count, w.queue_rank, w.id FROM annotation_item w
      WHERE {_level("w", count)}
      ORDER BY w.project_id, w.status, w.annotation_count, w.queue_rank, w.id
      LIMIT {int(window)}) win ON win.id = i.id
WHERE i.project_id = %(project)s AND i.status = 'pending' AND i.annotation_count = win.annotation_count{filters}
ORDER BY win.project_id, win.status, win.annotation_count, win.queue_rank, win.id
LIMIT 1
FOR UPDATE OF i SKIP LOCKED"""


# The partial unique index (one active task per item) is the final guard against two active tasks on one item.
INSERT_TASK_SQL = """
INSERT INTO annotation_task (item_id, annotator_id, status, lease_expires, draft, draft_version, created_at, updated_at)
VALUES (%(item)s, %(user)s, 'active', %(lease)s, '{}'::jsonb, 0, %(now)s, %(now)s)
ON CONFLICT (item_id) WHERE status = 'active' DO NOTHING
RETURNING id
"""


def claim_sql_params(*, project: Project, user_id: int, gold: bool, now: datetime, passed=()) -> dict:
    return {"project": Int8(project.pk), "gold": gold, "now": now, "user": Int8(user_id), "passed": ids(passed)}


@functools.lru_cache(maxsize=64)
def claim_next_sql(passes: tuple[tuple[int, bool, int | None], ...]) -> str:
    """The whole claim in one statement (one round trip, planned once per connection).

    `mine`: the caller's active tasks in the project. The passes are CTEs read in order through
    UNION ALL ... LIMIT 1, so a pass runs only when the ones before it found nothing, and each
    locks only the row it returns. The claim is gated on those: it runs only when every one of
    them is one the caller shows or already dealt with (%(ignore)s) and fewer than MAX_ACTIVE_TASKS are
    shown. `ins` creates the task; the partial unique index (one active task per item) is the final
    guard: a conflict (a lapsed task on the item, or one renewed meanwhile) inserts nothing and the
    caller decides. One row always: the active tasks, the new task id (or NULL), the item (or NULLs),
    then where the caller stands once it holds the new task (progress.PROGRESS_PARTS for that item,
    NULLs without one: read here, not in a statement of its own after the claim).
    """
    ctes = ",\n".join(f"p{n} AS ({claim_sql(count, window, gold)})" for n, (count, gold, window) in enumerate(passes))
    progress = ",\n       ".join(
        f"CASE WHEN (SELECT ins.id FROM ins) IS NOT NULL THEN {part.format(current='cand.id')} END"
        for part in PROGRESS_PARTS
    )
    union = " UNION ALL ".join(f"SELECT * FROM p{n}" for n in range(len(passes)))
    return f"""WITH mine AS (
    SELECT t.id, t.item_id, t.created_at FROM annotation_task t JOIN annotation_item h ON h.id = t.item_id
    WHERE t.annotator_id = %(user)s AND t.status = 'active' AND h.project_id = %(project)s
),
{ctes},
cand AS (
    SELECT * FROM ({union}) u
    WHERE NOT EXISTS (SELECT 1 FROM mine WHERE mine.id <> ALL(%(ignore)s::bigint[]))
      AND (SELECT count(*) FROM mine WHERE mine.id = ANY(%(shown)s::bigint[])) < {MAX_ACTIVE_TASKS}
    LIMIT 1
),
ins AS (
    INSERT INTO annotation_task
        (item_id, annotator_id, status, lease_expires, draft, draft_version, created_at, updated_at)
    SELECT cand.id, %(user)s, 'active', %(lease)s, '{{}}'::jsonb, 0, %(now)s, %(now)s FROM cand
    WHERE cand.status = 'pending' AND (cand.is_gold OR cand.annotation_count < %(needed)s)
    ON CONFLICT (item_id) WHERE status = 'active' DO NOTHING
    RETURNING id
)
SELECT (SELECT array_agg(mine.id ORDER BY mine.created_at, mine.id) FROM mine),
       (SELECT array_agg(mine.item_id ORDER BY mine.created_at, mine.id) FROM mine),
       (SELECT ins.id FROM ins),
       cand.*,
       {progress}
FROM (SELECT 1) one LEFT JOIN cand ON true"""


# The first statement of a claim's first transaction (claim._Claim.open): the claim's per-user
# lock (rules.claim_lock) and a crowd participant's standing (quota.CLAIM_LIMIT_SQL, asked only
# for password-less accounts: %(crowd)s), and for the API, which names the project by its slug,
# the project and the caller's role in it (as annotation/permissions.py get_project_for reads
# them). Its snapshot is taken before any wait for the lock, so a participant who may still claim
# is read again after it (claim._Claim.open); the claim's own statement comes after the lock.
def _claim_limit(project: str) -> str:
    return f"""LEFT JOIN LATERAL (
    SELECT sp.status, sp.started_at, s.time_limit_minutes, s.tasks_per_participant,
           (SELECT count(*) FROM annotation_annotation a JOIN annotation_item i ON i.id = a.item_id
            WHERE a.annotator_id = %(user)s AND i.project_id = {project}),
           (SELECT count(*) FROM annotation_task t JOIN annotation_item i ON i.id = t.item_id
            WHERE t.annotator_id = %(user)s AND t.status = 'active' AND t.lease_expires > %(now)s
              AND i.project_id = {project})
    FROM annotation_studyparticipant sp JOIN annotation_study s ON s.id = sp.study_id
    WHERE %(crowd)s::boolean AND sp.user_id = %(user)s AND s.project_id = {project}
    ORDER BY sp.started_at DESC, sp.id DESC
    LIMIT 1) lim ON true"""


_LOCK = f"pg_advisory_xact_lock({CLAIM_LOCK_CLASS}, %(user)s::integer)"
N_LIMIT_COLUMNS = 6
# Columns: the lock's (void), then the participation's N_LIMIT_COLUMNS (NULLs: none).
CLAIM_OPEN_SQL = f"""SELECT {_LOCK} IS NULL, lim.*
FROM (SELECT 1) one
{_claim_limit("%(project)s")}"""
# Columns: the project's, the caller's role in it, the lock's, the participation's. No row: no
# such project.
CLAIM_OPEN_PROJECT_SQL = f"""SELECT {columns(Project, "p")}, {role_sql("p.id")}, {_LOCK} IS NULL, lim.*
FROM annotation_project p
{_claim_limit("p.id")}
WHERE p.slug = %(slug)s"""


# Lazy reclaim, run when the claim locked an item whose task lapsed: the lapsed task gives the
# item back to the queue, then INSERT_TASK_SQL takes it (both through Django's cursor: rare).
EXPIRE_LAPSED_TASK_SQL = (
    "UPDATE annotation_task SET status = 'expired', updated_at = %s "
    "WHERE item_id = %s AND status = 'active' AND lease_expires <= %s"
)


# --- working on and submitting a task ---------------------------------------------------------


# Lock the item of the caller's own task (with its project), then the task: one statement, one
# round trip. The item is locked inside `it`, which the outer join must read before it can lock
# the task, so the global lock order holds. Both rows come back in their latest committed
# version (READ COMMITTED re-reads a row it had to wait for). `prior_ids` (this annotator's
# annotation of the item, or their annotation stored under the same Idempotency-Key: what makes
# a submit a repeat) is read with the statement's snapshot, taken before any wait for the item
# lock, so it can miss an annotation committed by the submit we waited for; the unique
# constraints catch that case and submit.annotation_submit then runs again (see there).
def _lock_own_task_sql(*, priors: bool, role: bool) -> str:
    """The statement above; `priors`: with prior_ids (submit's); `role`: with the caller's role in
    the task's project (the API's). Columns: the item's, the project's, the task's, then prior_ids
    and role where asked for (task_ops.lock_own_task reads them back)."""
    extra = ""
    if priors:
        extra += """,
       ARRAY(SELECT a.id FROM annotation_annotation a
             WHERE (a.item_id = t.item_id AND a.annotator_id = t.annotator_id)
                OR (a.annotator_id = t.annotator_id AND a.idempotency_key = %(key)s::text)
             ORDER BY a.id) AS prior_ids"""
    if role:
        extra += f""",
       {role_sql("it.p_id")} AS role"""
    return f"""
WITH it AS (
    SELECT {columns(Item, "i")}, {", ".join(f"p.{f.column} AS p_{f.column}" for f in Project._meta.concrete_fields)}
    FROM annotation_item i JOIN annotation_project p ON p.id = i.project_id
    WHERE i.id = (SELECT o.item_id FROM annotation_task o WHERE o.id = %(task)s AND o.annotator_id = %(user)s)
    FOR UPDATE OF i
)
SELECT it.*, {columns(Task, "t")}{extra}
FROM it JOIN annotation_task t ON t.id = %(task)s AND t.item_id = it.id
FOR UPDATE OF t
"""


@functools.lru_cache(maxsize=8)
def lock_own_task_sql(*, priors: bool, role: bool) -> str:
    """LOCK_OWN_TASK_SQL (priors, no role: the services' submit), SUBMIT_LOCK_SQL (both: the API's
    submit, one read of its task that also checks the caller), and without priors the statement of
    renew, autosave and skip (with the role: the API's, which reads its task once, too)."""
    return _lock_own_task_sql(priors=priors, role=role)


LOCK_OWN_TASK_SQL = lock_own_task_sql(priors=True, role=False)
# Submit's one read of its task: LOCK_OWN_TASK_SQL with the caller's role in the project, so the
# API checks the role with the task it locks, in the submit's own transaction (no separate
# lookup of the task before it, annotation/apis/work.py TaskSubmitApi).
SUBMIT_LOCK_SQL = lock_own_task_sql(priors=True, role=True)
PRIOR_IDS_SQL = """
SELECT ARRAY(SELECT a.id FROM annotation_annotation a
             WHERE (a.item_id = %(item)s AND a.annotator_id = %(user)s)
                OR (a.annotator_id = %(user)s AND a.idempotency_key = %(key)s::text)
             ORDER BY a.id)
"""
N_ITEM_COLUMNS = len(Item._meta.concrete_fields)
N_PROJECT_COLUMNS = len(Project._meta.concrete_fields)


# Store the annotation, mark the task submitted and count the annotation in one round trip (three
# different tables, so the order of the CTEs does not matter); gold items are never counted.
# The time stored is the server's (submit.py, active_ms): from the later of the task's claim
# (%(started)s) and the annotator's previous submit to now, at most one lease (%(lease)s seconds),
# in whole milliseconds. The previous submit is read here, after the item lock, with this
# statement's snapshot (annotation_annotator_idx: annotator, created_at).
STORE_SQL = """
WITH stored AS (
    INSERT INTO annotation_annotation (item_id, annotator_id, external_rater, task_id, result, time_spent_ms,
                                       idempotency_key, source, with_suggestion, created_at)
    VALUES (%(item)s, %(user)s, '', %(task)s, %(result)s::jsonb,
            floor(least(greatest(0, extract(epoch FROM %(now)s::timestamptz - greatest(
                %(started)s::timestamptz,
                (SELECT max(b.created_at) FROM annotation_annotation b
                 WHERE b.annotator_id = %(user)s AND b.source = 'task' AND b.created_at <= %(now)s)))),
                %(lease)s::numeric) * 1000)::integer,
            %(key)s::text, 'task',
            %(suggestable)s::boolean AND EXISTS (SELECT 1 FROM annotation_suggestion s
                                        WHERE s.item_id = %(item)s AND s.created_at <= %(now)s),
            %(now)s)
    RETURNING id, with_suggestion, time_spent_ms
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
SELECT stored.id, counted.annotation_count, counted.status, stored.with_suggestion, stored.time_spent_ms,
       CASE WHEN counted.status = 'annotated'
            THEN pg_advisory_xact_lock_shared(%(marking)s::integer, %(project)s::integer) IS NULL END
FROM stored LEFT JOIN counted ON true
"""
# The last column: a submit that completes its item takes the project's marking lock, shared, in
# the same statement (verification.py: after the item and task locks, before the thresholds are
# read); MARK_READ_SQL then reads them in a statement of its own, so with a snapshot taken after
# any wait for the lock.


# A completing submit's read, after the project's marking lock (taken by STORE_SQL): the
# thresholds in force and the item's annotations, (id, result) in id order, as
# verification.item_mark_disagreement reads them (its ITEM_ANSWERS_SQL).
MARK_READ_SQL = """
SELECT p.settings,
       (SELECT json_agg(json_build_array(a.id, a.result) ORDER BY a.id)::text
        FROM annotation_annotation a WHERE a.item_id = %(item)s)
FROM annotation_project p WHERE p.id = %(project)s
"""


# Renew, autosave and skip write their task back in one prepared statement (the ORM's save built
# and compiled an UPDATE on every call); the caller holds the task's row lock (lock_own_task).
# RETURNING: annotation/db.py reads a result from every statement it runs.
TASK_KEEP_SQL = """
UPDATE annotation_task SET status = %(status)s::text, lease_expires = %(lease)s, updated_at = %(now)s
WHERE id = %(task)s
RETURNING id
"""
TASK_DRAFT_SQL = """
UPDATE annotation_task
SET status = %(status)s::text, lease_expires = %(lease)s, draft = %(draft)s::jsonb,
    draft_version = %(version)s::integer, updated_at = %(now)s
WHERE id = %(task)s
RETURNING id
"""


def _roles_from(role: str) -> str:
    """The roles at least `role`, as an SQL list of literals (ROLE_RANK)."""
    return ", ".join(f"'{r.value}'" for r, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role])


def _lease_seconds_sql(settings: str) -> str:
    """rules.lease_seconds of a project's stored `settings` in SQL, where it is plain: the default
    when the key is missing (or the settings are NULL), the stored number when it is a whole
    number within LEASE_RANGE written as digits. NULL for anything else (a value the setting's
    check would clean or refuse, with a logged warning): the caller then takes the Python path."""
    lease = f"{settings}->'lease_seconds'"
    low, high = LEASE_RANGE
    return f"""CASE
        WHEN {settings} IS NULL OR jsonb_typeof({settings}) = 'null' THEN {int(DEFAULT_LEASE_SECONDS)}
        WHEN jsonb_typeof({settings}) <> 'object' THEN NULL
        WHEN {lease} IS NULL OR jsonb_typeof({lease}) = 'null' THEN {int(DEFAULT_LEASE_SECONDS)}
        WHEN jsonb_typeof({lease}) = 'number' AND ({lease} #>> '{{}}') ~ '^[0-9]{{1,9}}$'
             AND ({lease} #>> '{{}}')::integer BETWEEN {int(low)} AND {int(high)}
            THEN ({lease} #>> '{{}}')::integer
    END"""


@functools.lru_cache(maxsize=8)
def draft_save_sql(role: str) -> str:
    """Autosave's plain case in one statement (task_ops.task_save_draft_plain): the caller's
    active task, at the draft version the client saw, saved and its lease renewed, when the
    caller has at least `role` in its project (or %(superuser)s) and the project's lease is plain
    (_lease_seconds_sql). The item is locked first, then the task (the queue's lock order), as
    lock_own_task_sql does; the task's conditions are checked again on its latest version after
    any wait (READ COMMITTED). No row: nothing written, and the caller runs the whole path."""
    return f"""
WITH it AS (
    SELECT i.id, {_lease_seconds_sql("p.settings")} AS seconds, {role_sql("p.id")} AS role
    FROM annotation_item i JOIN annotation_project p ON p.id = i.project_id
    WHERE i.id = (SELECT o.item_id FROM annotation_task o WHERE o.id = %(task)s AND o.annotator_id = %(user)s)
    FOR UPDATE OF i
)
UPDATE annotation_task t
SET draft = %(draft)s::jsonb, draft_version = t.draft_version + 1,
    lease_expires = %(now)s::timestamptz + make_interval(secs => it.seconds), updated_at = %(now)s
FROM it
WHERE t.id = %(task)s AND t.item_id = it.id AND t.annotator_id = %(user)s
  AND t.status = 'active' AND t.draft_version = %(version)s::integer
  AND it.seconds IS NOT NULL AND (%(superuser)s::boolean OR it.role IN ({_roles_from(role)}))
RETURNING t.draft_version, it.seconds
"""
