"""Where an annotator stands, as every claim answers it (annotation.selectors.annotator_progress
says what the figures mean): read in one statement, run prepared by annotation/db.py as the
claim's own, instead of three ORM queries built and compiled on every claim."""

from __future__ import annotations

from psycopg.types.numeric import Int8

from .. import db
from ..models import Project
from ..project_setup import project_setting

# done: the annotations the user gave in the project. open: the items still open to them, the one
# shown aside, counted up to %(cap)s: pending, short of annotations (gold items too where the
# project mixes gold in), not answered by them. quota: a crowd participant's number of tasks in
# their latest study of the project (asked only for password-less accounts), which caps `left`.
PROGRESS_PARTS = (
    """(SELECT count(*) FROM annotation_annotation a JOIN annotation_item d ON d.id = a.item_id
        WHERE a.annotator_id = %(user)s AND d.project_id = %(project)s)""",
    """(SELECT count(*) FROM (
            SELECT 1 FROM annotation_item i
            WHERE i.project_id = %(project)s AND i.status = 'pending'
              AND ((NOT i.is_gold AND i.annotation_count < %(needed)s) OR (i.is_gold AND %(gold)s::boolean))
              AND i.id <> {current}
              AND NOT EXISTS (SELECT 1 FROM annotation_annotation b
                              WHERE b.item_id = i.id AND b.annotator_id = %(user)s)
            LIMIT %(cap)s) o)""",
    """(SELECT s.tasks_per_participant
        FROM annotation_studyparticipant sp JOIN annotation_study s ON s.id = sp.study_id
        WHERE %(crowd)s::boolean AND sp.user_id = %(user)s AND s.project_id = %(project)s
        ORDER BY sp.started_at DESC, sp.id DESC
        LIMIT 1)""",
)
PROGRESS_SQL = "SELECT " + ", ".join(part.format(current="%(current)s") for part in PROGRESS_PARTS)
# The claim's statement reads the same values for the item it claims (sql.claim_next_sql), in
# the claim's transaction: one round trip less per claim.


def progress_params(*, project: Project, user, cap: int) -> dict:
    """PROGRESS_PARTS's parameters but the current item."""
    return {
        "user": Int8(user.pk),
        "project": Int8(project.pk),
        "needed": Int8(project.annotations_per_item),
        "gold": bool(project_setting(project.settings, "gold_share", 0.0, project=project.slug)),
        "cap": Int8(cap),
        "crowd": not user.has_usable_password(),  # crowd accounts only have a study quota
    }


def progress_figures(done: int, open_items: int, quota: int | None, cap: int) -> dict:
    """The figures from PROGRESS_PARTS's values."""
    capped = open_items >= cap
    left = 1 + open_items
    if quota is not None:
        left = max(1, min(left, quota - done))
        capped = capped and left > cap
    return {"done": done, "left": left, "capped": capped}


def annotator_progress(*, project: Project, user, current_item_id: int, cap: int) -> dict:
    params = progress_params(project=project, user=user, cap=cap)
    ((done, open_items, quota),) = db.rows(PROGRESS_SQL, {**params, "current": Int8(current_item_id)})
    return progress_figures(done, open_items, quota, cap)
