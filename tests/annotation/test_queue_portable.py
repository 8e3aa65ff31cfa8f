"""The queue's portable twins (annotation/queue/portable.py, the SQLite demo's path) against its
PostgreSQL statements (annotation/queue/sql.py) on the same cases.

Each case runs twice on PostgreSQL, on fresh data of the same shape: once through the statements,
once with the twins forced (portable.in_use). Every step's outcome (which item a claim hands out,
leases, draft versions, statuses, errors and their messages) and the rows left behind are
recorded under stable names (item 0, task 1, ... instead of database ids); both runs must record
the same, and that is the outcome written out in the test. A run may not touch the other path:
the portable run refuses every prepared statement, the PostgreSQL run every twin.
"""
from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from annotation import db
from annotation.models import Annotation, Item, Review, Suggestion, Task
from annotation.queue import (
    annotation_submit,
    hold_renew,
    hold_save_draft,
    hold_skip,
    holds_expire_stale,
    portable,
    queue_claim_next,
)
from tests.annotation.work_factories import make_items_fast, make_people, valid_result

pytestmark = pytest.mark.django_db

PATHS = ("postgresql", "portable")
ALWAYS, NEVER = random.Random(), random.Random()
ALWAYS.random, NEVER.random = (lambda: 0.0), (lambda: 0.99)
BOX, OTHER_BOX = valid_result("box"), valid_result("box", 5)


def _refuse(*args, **kwargs):
    raise AssertionError("this run took the other path of the queue")


class Run:
    """One path's run of a case: its own project, people and items, and stable names for what it
    creates so the two runs compare."""

    def __init__(self, path: str, make_project, *, protocol: str = "changeit", items: int = 3, gold: int = 0,
                 now: datetime, **fields):
        self.project = make_project(f"q-{path}", protocol, **fields)
        self.people = make_people(3, prefix=f"{path}-")
        self.items = make_items_fast(self.project, items)
        Item.objects.filter(pk__in=self.items[:gold]).update(is_gold=True)
        self.now = now

    def at(self, seconds: float) -> datetime:
        return self.now + timedelta(seconds=seconds)

    def since(self, moment: datetime | None) -> float | None:
        return None if moment is None else (moment - self.now).total_seconds()

    def name(self, model, pk: int | None) -> int | None:
        """The row's rank among the project's rows of that model (0 = the first one made)."""
        if pk is None:
            return None
        return model.objects.filter(item__project=self.project, pk__lt=pk).count()

    def do(self, call, *args, **kwargs):
        """The outcome of one service call, or the error it raised."""
        try:
            out = call(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the error is the outcome
            extra = dict(getattr(exc, "extra", {}))
            if hasattr(exc, "annotation"):
                extra["annotation"] = (self.name(Annotation, exc.annotation.pk), exc.annotation.result)
            return (type(exc).__name__, str(exc), getattr(exc, "errors", None), extra)
        if out is None:
            return None
        if isinstance(out, Task):
            return ("task", self.name(Task, out.pk), self.items.index(out.item_id), out.status,
                    self.since(out.lease_expires), out.draft, out.draft_version)
        if isinstance(out, int):
            return ("count", out)
        a = out.annotation
        return ("annotation", self.name(Annotation, a.pk), out.created, self.items.index(a.item_id), a.result,
                a.with_suggestion, a.idempotency_key, out.warnings)

    def claim(self, who: int, *, at: float = 0, exclude=(), rng=None):
        return self.do(queue_claim_next, project=self.project, user=self.people[who], now=self.at(at),
                       exclude=tuple(self.task_pk(t) for t in exclude), rng=rng or NEVER)

    def submit(self, who: int, task: int, result=BOX, *, at: float | None = None, key: str | None = None):
        return self.do(annotation_submit, task_id=self.task_pk(task), user=self.people[who], result=result,
                       time_spent_ms=1500, idempotency_key=key, now=None if at is None else self.at(at))

    def renew(self, who: int, task: int, *, at: float = 0):
        return self.do(hold_renew, task_id=self.task_pk(task), user=self.people[who], now=self.at(at))

    def draft(self, who: int, task: int, draft: dict, version: int, *, at: float = 0):
        return self.do(hold_save_draft, task_id=self.task_pk(task), user=self.people[who], draft=draft,
                       version=version, now=self.at(at))

    def skip(self, who: int, task: int):
        return self.do(hold_skip, task_id=self.task_pk(task), user=self.people[who])

    def task_pk(self, task: int) -> int:
        return Task.objects.filter(item__project=self.project).order_by("pk").values_list("pk", flat=True)[task]

    def rows(self) -> dict:
        """What the case left in the database."""
        who = {p.pk: n for n, p in enumerate(self.people)}
        tasks = Task.objects.filter(item__project=self.project).order_by("pk")
        annotations = Annotation.objects.filter(item__project=self.project).order_by("pk")
        return {
            "items": list(Item.objects.filter(project=self.project).order_by("pk")
                          .values_list("status", "annotation_count", "is_gold")),
            "tasks": [(self.items.index(t.item_id), who[t.annotator_id], t.status, self.since(t.lease_expires),
                       t.draft, t.draft_version) for t in tasks],
            "annotations": [(self.items.index(a.item_id), who[a.annotator_id], self.name(Task, a.task_id), a.result,
                             a.time_spent_ms, a.idempotency_key, a.source, a.with_suggestion) for a in annotations],
            "reviews": list(Review.objects.filter(item__project=self.project).order_by("pk")
                            .values_list("decision", "result", "comment")),
        }


@pytest.fixture
def both_paths(make_project, monkeypatch):
    """Run a case on each path; the outcome both gave (they must agree)."""

    def run(case, **setup) -> dict:
        now = timezone.now()
        outcomes = {}
        for path in PATHS:
            with monkeypatch.context() as patch:
                if path == "portable":
                    patch.setattr(portable, "in_use", lambda: True)
                    patch.setattr(db, "rows", _refuse)
                else:
                    for twin in ("claim", "lock_own_task", "prior_ids", "store"):
                        patch.setattr(portable, twin, _refuse)
                r = Run(path, make_project, now=now, **setup)
                outcomes[path] = {"steps": case(r), **r.rows()}
        assert outcomes["portable"] == outcomes["postgresql"], "the portable path diverged"
        return outcomes["postgresql"]

    return run


def test_the_comparison_catches_a_twin_that_drifts(both_paths, monkeypatch):
    real_store = portable.store

    def drifting_store(**kwargs):  # marks every answer as given with a suggestion
        annotation_id, count, status, _suggested = real_store(**kwargs)
        return annotation_id, count, status, True

    monkeypatch.setattr(portable, "store", drifting_store)
    with pytest.raises(AssertionError, match="the portable path diverged"):
        both_paths(lambda r: [r.claim(0), r.submit(0, 0)], items=1)


def test_claim_goes_depth_first_and_hands_back_what_is_held(both_paths):
    def case(r: Run):
        return [r.claim(0), r.submit(0, 0), r.claim(1), r.claim(0, at=10), r.claim(2), r.claim(1, at=20),
                r.submit(1, 1), r.submit(0, 2), r.claim(0, at=30), r.claim(1, at=30)]

    out = both_paths(case, annotations_per_item=2, settings={"lease_seconds": 60})

    assert out["steps"] == [
        ("task", 0, 0, "active", 60.0, {}, 0),
        ("annotation", 0, True, 0, BOX, False, None, {}),
        ("task", 1, 0, "active", 60.0, {}, 0),  # the partly annotated item first
        ("task", 2, 1, "active", 70.0, {}, 0),
        ("task", 3, 2, "active", 60.0, {}, 0),
        ("task", 1, 0, "active", 80.0, {}, 0),  # a claim while holding hands the hold back, renewed
        ("annotation", 1, True, 0, BOX, False, None, {}),
        ("annotation", 2, True, 1, BOX, False, None, {}),
        None,  # u0 did item 1 and u2 holds item 2: nothing left for u0
        ("task", 4, 1, "active", 90.0, {}, 0),
    ]
    assert out["items"] == [("annotated", 2, False), ("pending", 1, False), ("pending", 0, False)]


def test_gold_share_and_exclude(both_paths):
    def case(r: Run):
        return [r.claim(0, rng=ALWAYS), r.submit(0, 0), r.claim(1, rng=ALWAYS), r.submit(1, 1, OTHER_BOX), r.claim(0, rng=ALWAYS),
                r.claim(0, exclude=(2,)), r.claim(0, exclude=(2, 3)), r.claim(0, at=5)]

    out = both_paths(case, items=4, gold=1, annotations_per_item=1, settings={"gold_share": 0.5})

    assert out["steps"] == [
        ("task", 0, 0, "active", 600.0, {}, 0),  # the draw asks for gold: the gold item
        ("annotation", 0, True, 0, BOX, False, None, {}),
        ("task", 1, 0, "active", 600.0, {}, 0),  # gold goes to everyone
        ("annotation", 1, True, 0, OTHER_BOX, False, None, {}),
        ("task", 2, 1, "active", 600.0, {}, 0),  # done with gold: a normal item
        ("task", 3, 2, "active", 600.0, {}, 0),  # shows task 2: preloads another
        None,  # shows two: no third hold
        ("task", 2, 1, "active", 605.0, {}, 0),  # a reload gets the oldest hold back
    ]
    assert out["items"] == [("pending", 0, True), ("pending", 0, False), ("pending", 0, False), ("pending", 0, False)]


def test_a_held_gold_item_is_taken_over_and_its_holder_still_answers(both_paths):
    def case(r: Run):
        return [r.claim(0, rng=ALWAYS), r.claim(1, rng=ALWAYS, at=10), r.claim(0, rng=ALWAYS, at=20, exclude=(0,)),
                r.renew(0, 0, at=30), r.submit(0, 0, at=40), r.submit(1, 1, OTHER_BOX, at=50),
                r.claim(2, rng=ALWAYS, at=60)]

    out = both_paths(case, items=2, gold=1, annotations_per_item=1, settings={"gold_share": 0.5})

    assert out["steps"] == [
        ("task", 0, 0, "active", 600.0, {}, 0),  # u0 holds the only gold item, then leaves it alone
        ("task", 1, 0, "active", 610.0, {}, 0),  # u1's draw asks for gold: u0's live hold is taken over
        ("task", 2, 1, "active", 620.0, {}, 0),  # u0 never gets their gold item twice: an ordinary one
        ("task", 0, 0, "expired", 630.0, {}, 0),  # u0's gold task: its clock runs on, the hold stays u1's
        ("annotation", 0, True, 0, BOX, False, None, {}),  # ... and u0's answer is taken
        ("annotation", 1, True, 0, OTHER_BOX, False, None, {}),
        ("task", 3, 0, "active", 660.0, {}, 0),  # free again: u2 claims it as usual
    ]
    assert out["tasks"] == [(0, 0, "submitted", 630.0, {}, 0), (0, 1, "submitted", 610.0, {}, 0),
                            (1, 0, "active", 620.0, {}, 0), (0, 2, "active", 660.0, {}, 0)]
    assert out["items"] == [("pending", 0, True), ("pending", 0, False)]


def test_renew_and_expire(both_paths):
    def case(r: Run):
        return [r.claim(0), r.renew(0, 0, at=30), r.do(holds_expire_stale, now=r.at(100)), r.renew(0, 0, at=110),
                r.do(holds_expire_stale, now=r.at(200)), r.claim(1, at=200), r.renew(0, 0, at=210),
                r.submit(0, 0, at=210), r.renew(1, 1, at=220), r.renew(2, 1, at=220)]

    out = both_paths(case, items=1, settings={"lease_seconds": 60})

    lost = ("Your hold on this task expired and the item went to someone else. Your draft is kept on this task, "
            "but it can no longer be submitted; load the next task.")
    assert out["steps"] == [
        ("task", 0, 0, "active", 60.0, {}, 0),
        ("task", 0, 0, "active", 90.0, {}, 0),
        ("count", 1),
        ("task", 0, 0, "active", 170.0, {}, 0),  # expired, nobody took the item: the hold comes back
        ("count", 1),
        ("task", 1, 0, "active", 260.0, {}, 0),
        ("TaskConflict", lost, None, {}),
        ("TaskConflict", "Your hold on this task expired and another annotator took the item, so this answer was "
                         "not saved. Load the next task.", None, {}),
        ("task", 1, 0, "active", 280.0, {}, 0),
        ("TaskNotFound", "No such task.", None, {}),  # someone else's task
    ]
    assert out["tasks"] == [(0, 0, "expired", 170.0, {}, 0), (0, 1, "active", 280.0, {}, 0)]
    assert out["annotations"] == []


def test_a_lapsed_hold_is_reclaimed_by_the_next_claim(both_paths):
    def case(r: Run):
        return [r.claim(0, at=-120), r.claim(1), r.submit(0, 0), r.claim(2)]

    out = both_paths(case, items=1, settings={"lease_seconds": 60})

    assert out["steps"] == [
        ("task", 0, 0, "active", -60.0, {}, 0),
        ("task", 1, 0, "active", 60.0, {}, 0),  # the lapsed hold gave the item back
        ("TaskConflict", "Your hold on this task expired and another annotator took the item, so this answer was "
                         "not saved. Load the next task.", None, {}),
        None,
    ]
    assert out["tasks"] == [(0, 0, "expired", -60.0, {}, 0), (0, 1, "active", 60.0, {}, 0)]


def test_draft_versions(both_paths):
    def case(r: Run):
        return [r.claim(0), r.draft(0, 0, {"bbox": [1, 1, 5, 5]}, 0, at=10), r.draft(0, 0, {"bbox": [9, 9, 9, 9]}, 0),
                r.draft(0, 0, {"bbox": [1, 1, 5, 5]}, 0, at=20), r.draft(0, 0, {"bbox": [2, 2, 5, 5]}, 1, at=30),
                r.submit(0, 0), r.draft(0, 0, {"bbox": [3, 3, 5, 5]}, 2)]

    out = both_paths(case, items=1)

    stale = ("This draft was saved from another tab or window in the meantime (version 1, yours is based on "
             "version 0). Reload the task to continue from the latest draft.")
    assert out["steps"] == [
        ("task", 0, 0, "active", 600.0, {}, 0),
        ("task", 0, 0, "active", 610.0, {"bbox": [1, 1, 5, 5]}, 1),
        ("TaskConflict", stale, None, {"version": 1, "draft": {"bbox": [1, 1, 5, 5]}}),
        ("task", 0, 0, "active", 620.0, {"bbox": [1, 1, 5, 5]}, 1),  # a replay of the save that made version 1
        ("task", 0, 0, "active", 630.0, {"bbox": [2, 2, 5, 5]}, 2),
        ("annotation", 0, True, 0, BOX, False, None, {}),
        ("TaskConflict", "This task was already submitted.", None, {}),
    ]
    assert out["tasks"] == [(0, 0, "submitted", 630.0, {"bbox": [2, 2, 5, 5]}, 2)]


def test_skip(both_paths):
    def case(r: Run):
        return [r.claim(0), r.skip(0, 0), r.skip(0, 0), r.submit(0, 0), r.renew(0, 0), r.claim(0), r.claim(1),
                r.submit(1, 2), r.skip(1, 2)]

    out = both_paths(case, items=2)

    assert out["steps"] == [
        ("task", 0, 0, "active", 600.0, {}, 0),
        ("task", 0, 0, "skipped", 600.0, {}, 0),
        ("task", 0, 0, "skipped", 600.0, {}, 0),  # skipping twice is one skip
        ("TaskConflict", "You skipped this task; load the next one.", None, {}),
        ("TaskConflict", "You skipped this task; load the next one.", None, {}),
        ("task", 1, 1, "active", 600.0, {}, 0),  # never the skipped item again
        ("task", 2, 0, "active", 600.0, {}, 0),  # others get it
        ("annotation", 0, True, 0, BOX, False, None, {}),
        ("TaskConflict", "This task was already submitted; it cannot be skipped.", None, {}),
    ]


def test_submit_repeats_keys_and_conflicts(both_paths):
    def case(r: Run):
        return [
            r.claim(0), r.submit(0, 0, {"bbox": "nope"}), r.submit(0, 0, key=" k-1 "), r.submit(0, 0, key="k-1"),
            r.submit(0, 0), r.submit(0, 0, OTHER_BOX, key="k-1"), r.claim(1), r.submit(1, 1, OTHER_BOX, key="k-1"),
            r.claim(0), r.submit(0, 2, key="k-1"), r.submit(1, 2), r.submit(0, 2),
        ]

    out = both_paths(case, items=2, annotations_per_item=2)

    steps = out["steps"]
    bad_box = {"bbox": "Draw one box: [x, y, width, height] in image pixels (or answer nothing_to_label / "
                       "cannot_determine).", "state": "Pick the state label from the listed candidates."}
    assert steps[1] == ("ResultInvalid", "; ".join(f"{k}: {v}" for k, v in bad_box.items()), bad_box, {})
    assert steps[2:8] == [
        ("annotation", 0, True, 0, BOX, False, "k-1", {}),  # the key is stripped
        ("annotation", 0, False, 0, BOX, False, "k-1", {}),  # a retry with the key
        ("annotation", 0, False, 0, BOX, False, "k-1", {}),  # a second tab without it
        ("AlreadySubmitted", "This task was already submitted with a different answer (from another tab or "
                             "window, or an earlier submit). The first answer is kept; yours was not saved.",
         None, {"annotation": (0, BOX)}),
        ("task", 1, 0, "active", 600.0, {}, 0),
        ("annotation", 1, True, 0, OTHER_BOX, False, "k-1", {}),  # keys are per annotator
    ]
    assert steps[8] == ("task", 2, 1, "active", 600.0, {}, 0)
    assert steps[9] == ("TaskConflict", "This Idempotency-Key was already used for another submission.", None, {})
    assert steps[10] == ("TaskNotFound", "No such task.", None, {})  # someone else's task
    assert steps[11] == ("annotation", 2, True, 1, BOX, False, None, {})
    assert out["items"] == [("annotated", 2, False), ("pending", 1, False)]
    assert [a[:3] for a in out["annotations"]] == [(0, 0, 0), (0, 1, 1), (1, 0, 2)]  # (item, annotator, task)


def test_agreeing_annotators_verify_the_item(both_paths):
    def case(r: Run):
        return [r.claim(0), r.submit(0, 0), r.claim(1), r.submit(1, 1)]

    out = both_paths(case, items=1, annotations_per_item=2, settings={"auto_verify": True})

    assert out["items"] == [("verified", 2, False)]
    assert out["reviews"] == [("auto", BOX, "Annotators agree.")]


def test_an_answer_given_with_a_suggestion_on_the_form_is_marked(both_paths):
    def case(r: Run):
        Suggestion.objects.create(item_id=r.items[0], source="job:1 tiny-vlm", result={"answer": "B"})
        # Submitted at the real time, after the suggestion was stored.
        return [r.claim(0), r.submit(0, 0, valid_result("qa")), r.claim(0), r.submit(0, 1, valid_result("qa"))]

    out = both_paths(case, protocol="visualtrans", items=2)

    assert [s[5] for s in out["steps"][1::2]] == [True, False]
    assert [a[-1] for a in out["annotations"]] == [True, False]
