"""Answer parsing shared with inference: one canonical form per protocol, None when unreadable."""

import pytest

from protocols.kit.answers import normalize_int, parse_answer
from protocols.normalize import answer_multiset

STATES = ["a closed cabinet", "an open cabinet"]
CHANGES = ["open the cabinet", "close the cabinet", "paint the cabinet", "lift the cabinet"]


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("B", "B"),
        ("b", "B"),
        (" (B) ", "B"),
        ("**B**", "B"),
        ("Answer: (B)", "B"),
        ("The answer is A.", "A"),
        ("B. an open cabinet", "B"),
        ("an open cabinet", "B"),
        ("Option B", "B"),
        ("I think it is an open cabinet.", "B"),
        ("C", None),
        ("", None),
        ("A cabinet", None),
        (None, None),
        (1, None),
        # The article "a" is not option A; a lower-case letter counts only when it stands alone.
        ("The answer is a cabinet that is open", None),
        ("Answer: a half-open cabinet", None),
        ("answer: b", "B"),
        ("The answer is a.", "A"),
        ("the answer is (b) the open one", "B"),
        ("answer - a", "A"),
        ("The answer is B because the door is ajar", "B"),
    ],
)
def test_status_letters(raw, expected):
    assert parse_answer("status", "osi_a", raw, STATES) == expected


def test_sci4_allows_four_letters_and_option_text():
    assert parse_answer("status", "sci4", "D", CHANGES) == "D"
    assert parse_answer("status", "sci4", "paint the cabinet", CHANGES) == "C"
    assert parse_answer("status", "sci4", "E", CHANGES) is None


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("3", 3),
        (3, 3),
        ("3.", 3),
        ("Answer: 10", 10),
        ("peeled apple", 2),
        ("2: peeled apple", 2),
        ("0", None),
        ("11", None),
        ("1 or 2", None),
        (True, None),
        ("a banana", None),
    ],
)
def test_changeit_candidate_numbers(raw, expected):
    cands = ["whole apple", "peeled apple"] + [f"label {i}" for i in range(8)]
    assert parse_answer("changeit", "state:standard:full", raw, cands) == expected


def test_visualtrans_formats_from_keyword_or_inferred():
    assert parse_answer("visualtrans", "qa", "(C)", ["x", "y", "z"], fmt="choice") == "C"
    assert parse_answer("visualtrans", "qa", "There are 4 cups.", [], fmt="count") == 4
    assert parse_answer("visualtrans", "qa", "4.5", [], fmt="count") is None
    assert parse_answer("visualtrans", "qa", "Knife ,apple", [], fmt="set") == ["apple", "knife"]
    assert parse_answer("visualtrans", "qa", '["b", "a"]', [], fmt="set") == ["a", "b"]
    assert parse_answer("visualtrans", "qa", "y", ["x", "y"]) == "B"  # options given: choice
    assert parse_answer("visualtrans", "qa", "7", []) == 7  # no options, a number: count
    assert parse_answer("visualtrans", "qa", "cup, lid", []) == ["cup", "lid"]


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("A,C", ["A", "C"]),
        (["c", "A", "a"], ["A", "C"]),
        ("(A) and (C)", ["A", "C"]),
        ("The correct options are A and C.", ["A", "C"]),
        ("Answer: D", ["D"]),
        ("cup, door", ["A", "C"]),
        ("E", None),
        ("", None),
        ([], None),
        ([1], None),
    ],
)
def test_m3verse_letter_sets(raw, expected):
    assert parse_answer("m3verse", "qa", raw, ["cup", "lamp", "door", "none listed"]) == expected


def test_judge_json_with_fences_prose_evidence_and_na():
    raw = (
        'Evidence first.\n```json\n{"subject": {"evidence": "no person", "score": "N/A"}, "object": 4, "action": '
        '3,\n "realism": 5,}\n```\nDone.'
    )
    parsed = parse_answer("oscbench", "judge", raw, [])
    assert parsed == {
        "subject": None,
        "object": 4,
        "action": 3,
        "osc_accuracy": None,
        "osc_consistency": None,
        "scene": None,
        "realism": 5,
        "aesthetics": None,
    }
    assert parse_answer("oscbench", "judge", {"object": 0}, []) is None
    assert parse_answer("oscbench", "judge", {"unrelated": 3}, []) is None


def test_normalizers():
    assert answer_multiset("a, a") == ["a", "a"]
    assert answer_multiset(" , ") is None
    assert normalize_int(2.0) == 2 and normalize_int(2.5) is None and normalize_int("-3") == -3


def test_unknown_protocol_and_format_raise():
    with pytest.raises(ValueError):
        parse_answer("nope", "qa", "A", [])
    with pytest.raises(ValueError):
        parse_answer("visualtrans", "qa", "A", [], fmt="essay")
