"""Validation of submitted results per workflow (pure functions, no database)."""

from __future__ import annotations

import pytest

from annotation.results import (
    BoxContext,
    QAContext,
    RatingContext,
    ResultInvalid,
    validate_box,
    validate_qa,
    validate_quintuplet,
    validate_rating,
    validate_result,
)
from protocols.oscbench import CRITERIA as OSC_CRITERIA
from protocols.oscbench import NULLABLE as OSC_NULLABLE


def errors_of(fn, *args) -> dict:
    with pytest.raises(ResultInvalid) as err:
        fn(*args)
    return err.value.errors


QUINT = {
    "state_a": "a closed  jar",
    "state_b": "an open jar",
    "change": "open the jar",
    "change_distractors": ["close the jar", "fill the jar", "break the jar"],
    "category": "functional",
    "difference": "slight",
}


def test_quintuplet_valid_is_cleaned_without_warnings():
    out = validate_quintuplet(QUINT)
    assert out.result == {**QUINT, "state_a": "a closed jar"}
    assert out.warnings == {}


def test_quintuplet_format_checks_warn_but_do_not_block():
    out = validate_quintuplet(
        {
            **QUINT,
            "state_a": "open",
            "change": "the jar gets opened",
            "change_distractors": ["close the jar", "quickly fill it", "break the jar"],
        }
    )
    assert set(out.warnings) == {"state_a", "change", "change_distractors.1"}
    assert out.warnings["change"] == "A change description should start with a verb, e.g. 'open the door'."
    assert out.result["state_a"] == "open"


def test_quintuplet_errors_name_each_field():
    bad = {
        "state_a": "",
        "state_b": "an open jar",
        "change": "open the jar",
        "change_distractors": ["close the jar", "", "open the jar"],
        "category": "spatial",
        "difference": "huge",
        "extra": 1,
    }
    assert errors_of(validate_quintuplet, bad) == {
        "extra": "Unknown field.",
        "state_a": "Write a non-empty text.",
        "change_distractors.1": "Write a non-empty text.",
        "change_distractors": "A wrong change description repeats the correct change.",
        "category": "Choose one of: positional, functional, other.",
        "difference": "Choose one of: slight, significant.",
    }
    assert errors_of(validate_quintuplet, {**QUINT, "change_distractors": ["a", "b"]}) == {
        "change_distractors": "Give exactly 3 wrong change descriptions."
    }
    assert errors_of(validate_quintuplet, {**QUINT, "state_b": "A closed jar"}) == {
        "state_b": "The two states must differ."
    }


BOX = BoxContext(width=640, height=480, labels=("peeled apple", "whole apple"))


def test_box_is_clipped_to_the_image():
    assert validate_box({"bbox": [-10, 470, 100.333, 50], "state": "whole apple"}, BOX).result == {
        "bbox": [0.0, 470.0, 90.33, 10.0],
        "state": "whole apple",
    }
    assert validate_box(
        {"bbox": [5, 5, 10, 10], "state": "peeled apple"}, BoxContext(None, None, BOX.labels)
    ).result == {"bbox": [5.0, 5.0, 10.0, 10.0], "state": "peeled apple"}


def test_box_outcomes_and_errors():
    assert validate_box({"outcome": "nothing_to_label"}, BOX).result == {"outcome": "nothing_to_label"}
    assert errors_of(validate_box, {"outcome": "maybe"}, BOX) == {
        "outcome": "Choose one of: nothing_to_label, cannot_determine."
    }
    assert errors_of(validate_box, {"bbox": [700, 10, 20, 20], "state": "whole apple"}, BOX) == {
        "bbox": "The box lies outside the image."
    }
    assert errors_of(validate_box, {"bbox": [1, 1, 0, 20], "state": "whole apple"}, BOX) == {
        "bbox": "The box needs a positive width and height."
    }
    assert list(errors_of(validate_box, {"bbox": [1, "2", 3, 4], "state": "x"}, BOX)) == ["bbox", "state"]
    assert list(errors_of(validate_box, {"bbox": [1, True, 3, 4], "state": "whole apple"}, BOX)) == ["bbox"]
    assert errors_of(validate_box, [1, 2], BOX) == {"result": "The result must be a JSON object."}


def test_qa_single_choice_multiple_choice_count_and_set():
    single = QAContext("choice", n_options=3)
    multi = QAContext("choice", n_options=4, multiple=True)
    assert validate_qa({"answer": "b"}, single).result == {"answer": "B", "flags": []}
    assert validate_qa({"answer": "C,a", "flags": ["ambiguous", "wrong_ground_truth"]}, multi).result == {
        "answer": ["A", "C"],
        "flags": ["wrong_ground_truth", "ambiguous"],
    }
    assert validate_qa({"answer": "12"}, QAContext("count")).result == {"answer": 12, "flags": []}
    assert validate_qa({"answer": "cup,  big bowl"}, QAContext("set")).result == {
        "answer": ["cup", "big bowl"],
        "flags": [],
    }
    assert validate_qa({"answer": None, "flags": ["insufficient_evidence"]}, single).result == {
        "answer": None,
        "flags": ["insufficient_evidence"],
    }


def test_qa_errors_name_answer_or_flags():
    single = QAContext("choice", n_options=3)
    assert errors_of(validate_qa, {"answer": "D"}, single) == {"answer": "Answer with option letters from A, B, C."}
    assert errors_of(validate_qa, {"answer": ["A", "B"]}, single) == {
        "answer": "Exactly one option is correct for this question: give one letter."
    }
    assert errors_of(validate_qa, {"answer": ["A", "A"]}, QAContext("choice", 3, True)) == {
        "answer": "Each option letter at most once."
    }
    assert errors_of(validate_qa, {"answer": -1}, QAContext("count")) == {
        "answer": "Answer with a whole number (0 or more)."
    }
    assert errors_of(validate_qa, {"answer": None}, single) == {
        "answer": "Answer the question, or set a flag saying why you cannot."
    }
    assert errors_of(validate_qa, {"answer": "A", "flags": ["wrong"]}, single) == {
        "flags": (
            "Flags are a list drawn from: missing_correct_option, wrong_ground_truth, ambiguous, insufficient_evidence."
        )
    }


RATING = RatingContext(criteria=OSC_CRITERIA, nullable=OSC_NULLABLE)
SCORES = {
    "subject": None,
    "object": 5,
    "action": 4,
    "osc_accuracy": 3,
    "osc_consistency": 1,
    "scene": 2,
    "realism": 2,
    "aesthetics": 3,
}


def test_rating_needs_all_eight_criteria_and_na_only_where_allowed():
    assert validate_rating({"scores": SCORES}, RATING).result == {"scores": SCORES}
    assert errors_of(
        validate_rating, {"scores": {**SCORES, "object": None, "realism": 6, "aesthetics": 2.5, "fun": 3}}, RATING
    ) == {
        "scores.fun": f"unknown criterion; allowed: {', '.join(OSC_CRITERIA)}",
        "scores.object": "may not be null (only subject and scene may be N/A)",
        "scores.realism": "must be a whole number from 1 to 5",
        "scores.aesthetics": "must be a whole number from 1 to 5",
    }
    missing = dict(SCORES)
    del missing["action"]
    assert errors_of(validate_rating, {"scores": missing}, RATING) == {
        "scores.action": "missing: give a whole number from 1 to 5"
    }
    assert errors_of(validate_rating, {"scores": [1, 2]}, RATING) == {
        "scores": (
            "must be an object criterion -> a whole number from 1 to 5 (null for N/A: subject and scene only), "
            f"naming each of {', '.join(OSC_CRITERIA)}"
        )
    }


def test_validate_result_dispatches_by_workflow():
    assert validate_result("rating", {"scores": SCORES}, RATING).result == {"scores": SCORES}
    assert validate_result("box", {"outcome": "cannot_determine"}, BOX).result == {"outcome": "cannot_determine"}
    with pytest.raises(ValueError):
        validate_result("poetry", {})


def test_a_quintuplet_is_checked_by_its_protocols_fields_and_choices():
    """The fields and closed values come from the protocol object (protocols/base.py result_fields,
    result_choices), not from one protocol's module."""
    from annotation.protocols import quintuplet_choices, quintuplet_fields
    from annotation.results import QuintupletContext, ResultInvalid, validate_quintuplet
    from protocols import registry

    status = registry.get("status")
    assert quintuplet_fields("status") == quintuplet_fields() == status.result_fields
    assert quintuplet_choices("status") == quintuplet_choices() == status.result_choices
    result = {
        "state_a": "a closed door",
        "state_b": "an open door",
        "change": "open the door",
        "change_distractors": ["close the door", "paint the door", "lock the door"],
        "category": "positional",
        "difference": "slight",
    }
    assert validate_quintuplet(result).result == result
    other = QuintupletContext(
        fields=status.result_fields, choices={"category": ("kinetic",), "difference": ("slight",)}
    )
    with pytest.raises(ResultInvalid) as refused:
        validate_quintuplet(result, other)
    assert refused.value.errors == {"category": "Choose one of: kinetic."}
