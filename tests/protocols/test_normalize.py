"""The two text rules (protocols.normalize), each as its protocol's spec page states it, and the
callers that must use them: docs/protocols/visualtrans.md § "Scoring" (answer rule),
docs/protocols/status.md § "Agreement" (description rule)."""

from __future__ import annotations

import pytest

from annotation import agreement
from protocols.kit.answers import parse_answer, parse_choice
from protocols.normalize import answer_multiset, answer_text, description_text
from protocols.visualtrans import scoring as visualtrans

# --- the answer rule: exact match after case, whitespace and surrounding punctuation ----------


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("Cup", "cup"),
        ("  big   bowl ", "big bowl"),
        ("bowl.", "bowl"),
        ('"(lid)"', "lid"),
        ("STRASSE", "strasse"),
        ("Straße", "strasse"),  # case folded, not only lower-cased
        ("a cup", "a cup"),
        ("the lid", "the lid"),  # articles are part of the answer
        ("lid, cup", "lid, cup"),  # inner punctuation stays: only the edges are stripped
        (3, "3"),
    ],
)
def test_answer_text_ignores_case_whitespace_and_edge_punctuation_only(raw, expected):
    assert answer_text(raw) == expected


def test_answer_multiset_is_exact_set_match_ignoring_case_whitespace_and_order():
    assert answer_multiset(["Cup", " big  bowl"]) == answer_multiset("big bowl, cup") == ["big bowl", "cup"]
    assert answer_multiset('["lid", "Cup"]') == ["cup", "lid"]
    # A multiset: a repeated name is not the same answer as the name once.
    assert answer_multiset("cup, cup") == ["cup", "cup"] != answer_multiset("cup")
    # Articles count: "a cup" is another element than "cup".
    assert answer_multiset("a cup") != answer_multiset("cup")
    # Nothing readable is no answer.
    assert answer_multiset(" , ") is None and answer_multiset([]) is None and answer_multiset(None) is None
    assert answer_multiset(["cup", None]) is None and answer_multiset(7) is None


def test_visualtrans_set_scoring_needs_nothing_missing_and_nothing_extra():
    truth = ["cup", "Big Bowl"]
    assert visualtrans.is_correct("set", truth, parse_answer("visualtrans", "qa", "big bowl, CUP.", [], fmt="set"))
    assert not visualtrans.is_correct("set", truth, parse_answer("visualtrans", "qa", "cup", [], fmt="set"))
    assert not visualtrans.is_correct(
        "set", truth, parse_answer("visualtrans", "qa", "cup, big bowl, lid", [], fmt="set")
    )
    assert not visualtrans.is_correct(
        "set", truth, parse_answer("visualtrans", "qa", "the cup, big bowl", [], fmt="set")
    )


def test_option_text_answers_match_by_the_answer_rule():
    options = ["a closed cabinet", "an open cabinet"]
    assert parse_choice("An open cabinet.", options) == "B"
    # Without its article the reply is no option's text (nor contains one): unreadable.
    assert parse_choice("open cabinet", options) is None


# --- blind QA answers: agreement and gold use the answer rule scoring uses ---------------------


@pytest.mark.parametrize(
    "answer,truth,correct",
    [
        (["cup."], ["Cup"], True),
        ("cup, big  bowl", ["big bowl", "cup"], True),
        (["a cup"], ["cup"], False),
        (["cup"], ["cup", "cup"], False),
    ],
)
def test_qa_agreement_and_visualtrans_scoring_give_one_verdict(answer, truth, correct):
    assert agreement.qa_correct(answer, truth) is correct
    assert visualtrans.is_correct("set", truth, parse_answer("visualtrans", "qa", answer, [], fmt="set")) is correct
    assert agreement.qa_answers_agree(answer, truth) is correct


# --- the description rule: free-text descriptions of two annotators ----------------------------


@pytest.mark.parametrize(
    "a,b",
    [
        ("The closed jar.", "closed jar"),
        ("a slightly-opened door", "slightly opened door"),
        ("Open the jar!", "open  jar"),
        ("AN apple", "apple"),
    ],
)
def test_description_text_ignores_case_punctuation_and_articles(a, b):
    assert description_text(a) == description_text(b)


def test_description_text_keeps_words_and_their_order():
    assert description_text("closed jar") != description_text("jar closed")
    assert description_text("a closed jar") != description_text("a closed box")
    assert description_text("theatre door") == "theatre door"  # "the" only as a whole word
    assert description_text(None) == ""


def test_status_quintuplet_agreement_uses_the_description_rule():
    a = {"state_a": "The closed jar.", "change_distractors": ["Close the jar", "fill jar"]}
    b = {"state_a": "closed jar", "change_distractors": ["fill the jar", "close jar"]}
    for field in ("state_a", "change_distractors"):
        assert agreement.quintuplet_field_value(a, field) == agreement.quintuplet_field_value(b, field)
    # The answer rule would keep them apart: the two rules differ exactly there.
    assert answer_text(a["state_a"]) != answer_text(b["state_a"])
