"""One rating rule, three paths: a submitted rating (annotation.results.validate_rating), an
imported rating line (annotation.importing.annotation_lines.check_rating) and an OSCBench gold
item's expected scores (protocols.oscbench.fields.gold_scores) accept and refuse the same
scores, naming the same criterion with the same words (protocols.fields.rating_score_errors owns
the rule). The one difference is by design: a gold item may give a subset of the criteria."""

from __future__ import annotations

import pytest

from annotation.importing.annotation_lines import CheckedAnnotation, check_rating
from annotation.results import RatingContext, ResultInvalid, validate_rating
from protocols.fields import Invalid
from protocols.oscbench import CRITERIA as OSC_CRITERIA
from protocols.oscbench import NULLABLE as OSC_NULLABLE
from protocols.oscbench.fields import gold_scores

RATING = RatingContext(criteria=OSC_CRITERIA, nullable=OSC_NULLABLE)

VALID = {
    "subject": None,
    "object": 5,
    "action": 4,
    "osc_accuracy": 3,
    "osc_consistency": 1,
    "scene": None,
    "realism": 2,
    "aesthetics": 3,
}
CRITERIA = ", ".join(OSC_CRITERIA)
WHOLE = "a whole number from 1 to 5"
NOT_NULL = "may not be null (only subject and scene may be N/A)"

# scores -> {criterion: reason} refused ({} when accepted); None names the scores as a whole.
TABLE = [
    (VALID, {}),
    ({c: 1 for c in OSC_CRITERIA}, {}),
    ({c: 5 for c in OSC_CRITERIA}, {}),
    ({**VALID, "subject": 2, "scene": 4}, {}),
    ({**VALID, "object": None}, {"object": NOT_NULL}),
    ({**VALID, "realism": None, "aesthetics": None}, {"realism": NOT_NULL, "aesthetics": NOT_NULL}),
    ({**VALID, "realism": 0, "aesthetics": 6}, {"realism": f"must be {WHOLE}", "aesthetics": f"must be {WHOLE}"}),
    ({**VALID, "object": True}, {"object": f"must be {WHOLE}"}),
    ({**VALID, "object": 4.0}, {"object": f"must be {WHOLE}"}),
    ({**VALID, "action": "4"}, {"action": f"must be {WHOLE}"}),
    ({**VALID, "scene": 3.5}, {"scene": f"must be {WHOLE} or null for N/A"}),
    ({**VALID, "subject": "N/A"}, {"subject": f"must be {WHOLE} or null for N/A"}),
    ({**VALID, "mood": 3}, {"mood": f"unknown criterion; allowed: {CRITERIA}"}),
    (
        {**VALID, "mood": 3, "object": 9},
        {"mood": f"unknown criterion; allowed: {CRITERIA}", "object": f"must be {WHOLE}"},
    ),
    (
        [4, 4],
        {
            None: f"must be an object criterion -> {WHOLE} (null for N/A: subject and scene only), naming each of "
            f"{CRITERIA}"
        },
    ),
    (
        "4",
        {
            None: f"must be an object criterion -> {WHOLE} (null for N/A: subject and scene only), naming each of "
            f"{CRITERIA}"
        },
    ),
]


def submitted(scores) -> dict:
    try:
        validate_rating({"scores": scores}, RATING)
    except ResultInvalid as exc:
        return {None if k == "scores" else k.removeprefix("scores."): v for k, v in exc.errors.items()}
    return {}


def imported(scores) -> dict:
    out = check_rating({"item": "osc-1", "rater": "r1", "scores": scores}, RATING)
    if isinstance(out, CheckedAnnotation):
        return {}
    return {None if e.field == "scores" else e.field.removeprefix("scores."): e.reason for e in out}


def gold(scores) -> str | None:
    """The gold path's one reason (it names the first refused criterion before it), None when accepted."""
    try:
        gold_scores(scores)
    except Invalid as exc:
        return exc.reason
    return None


@pytest.mark.parametrize("scores,refused", TABLE, ids=[str(i) for i in range(len(TABLE))])
def test_the_three_paths_accept_and_refuse_the_same_scores_in_the_same_words(scores, refused):
    assert submitted(scores) == refused
    assert imported(scores) == refused
    if not refused:
        assert gold(scores) is None
    else:
        first, reason = next(iter(refused.items()))
        whole = reason.replace("naming each of", "naming at least one of")  # a gold item may give a subset
        assert gold(scores) == (whole if first is None else f"{first}: {reason}")


def test_the_accepted_scores_are_stored_the_same_way():
    shuffled = dict(reversed(list(VALID.items())))
    assert validate_rating({"scores": shuffled}, RATING).result == {"scores": VALID}
    assert check_rating({"item": "osc-1", "rater": "r1", "scores": shuffled}, RATING).result == {"scores": VALID}


@pytest.mark.parametrize("missing", ["action", "scene"])
def test_only_a_gold_item_may_leave_criteria_out(missing):
    scores = {c: v for c, v in VALID.items() if c != missing}
    reason = f"missing: give {WHOLE}" + (" or null for N/A" if missing == "scene" else "")
    assert submitted(scores) == imported(scores) == {missing: reason}
    assert gold(scores) is None
    assert gold({}) == (
        f"must be an object criterion -> {WHOLE} (null for N/A: subject and scene only), naming at "
        f"least one of {CRITERIA}"
    )
