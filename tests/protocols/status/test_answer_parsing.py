"""How a free-text reply names an option (protocols/kit/answers.py; docs/protocols/status.md,
"Answer parsing"): whole words, the most specific text, and candidates the query did not show."""

from __future__ import annotations

import pytest

from protocols.kit.answers import parse_answer, parse_choice, parse_letter_set, parse_qa
from protocols.status import protocol

TAPE = [
    "almost fully retract the tape measure",
    "fully retract the tape measure",
    "retract the tape measure halfway",
    "slightly retract the tape measure",
]


@pytest.mark.parametrize(
    ("reply", "options", "letter"),
    [
        # Whole words only: "fully open" is not inside "carefully open".
        ("They carefully open the cracked egg.", ["fully open the cracked egg", "crack open the intact egg"], None),
        ("They fully open the cracked egg.", ["fully open the cracked egg", "crack open the intact egg"], "A"),
        ("a cupboard", ["a cup", "a lid"], None),
        ("put it in a cup", ["a cup", "a lid"], "A"),
        ("13 apples", ["3", "4"], None),
        # The most specific text wins over the texts it holds.
        ("almost fully retract the tape measure", TAPE, "A"),
        ("I think: almost fully retract the tape measure.", TAPE, "A"),
        ("They fully retract the tape measure", TAPE, "B"),
        ("retract the tape measure halfway", TAPE, "C"),
        # Two texts named apart from each other: unreadable, as two unrelated options are.
        ("fully retract the tape measure, or slightly retract the tape measure", TAPE, None),
        ("fully retract the tape measure, not almost fully retract the tape measure", TAPE, None),
        # A letter with its own text, and a bare letter.
        ("B. fully retract the tape measure", TAPE, "B"),
        ("B", TAPE, "B"),
    ],
)
def test_free_text_names_an_option_as_a_careful_grader_reads_it(reply, options, letter):
    assert parse_choice(reply, options) == letter


def test_a_reply_naming_a_candidate_the_query_did_not_show_is_not_credited():
    shown = ["fully retract the tape measure", "slightly retract the tape measure"]
    hidden = ["almost fully retract the tape measure", "retract the tape measure halfway"]
    for reply in ("almost fully retract the tape measure", "They almost fully retract the tape measure."):
        assert parse_choice(reply, shown, unshown=hidden) is None
        assert parse_answer("status", "sci2", reply, shown, unshown=hidden) is None
    # The shown options still read, by text and by letter.
    assert parse_choice("They fully retract the tape measure.", shown, unshown=hidden) == "A"
    assert parse_choice("slightly retract the tape measure", shown, unshown=hidden) == "B"
    assert parse_choice("Answer: B", shown, unshown=hidden) == "B"
    # A text both shown and unshown (an item listing one distractor twice) is the shown option.
    assert parse_choice("cut the pea", ["cut the pea in two", "cut the pea"], unshown=["cut the pea"]) == "B"


def test_the_qa_and_choice_parsers_take_the_unshown_texts_and_the_others_keep_their_rules():
    assert parse_qa("almost fully retract the tape measure", TAPE[1:3], unshown=[TAPE[0]]) is None
    assert parse_qa("almost fully retract the tape measure", TAPE[1:3]) == "A"
    assert parse_answer("visualtrans", "qa", "3", [], fmt="count") == 3
    assert parse_letter_set("a cup, a lid", ["a cup", "a lid", "a box"]) == ["A", "B"]
    assert parse_letter_set("a cupboard, a lid", ["a cup", "a lid", "a box"]) is None


def test_the_sci2_query_records_the_distractors_it_leaves_out():
    payload = {
        "image_a": "a.png",
        "image_b": "b.png",
        "state_a": "an extended tape measure",
        "state_b": "a retracted tape measure",
        "change": TAPE[1],
        "change_distractors": [TAPE[0], TAPE[2], TAPE[3]],
    }
    resolved = protocol.resolve_queries("80", payload, seed=5)
    sci2 = resolved["sci2"]
    shown_distractor = next(o for o in sci2["options"] if o != TAPE[1])
    assert sorted([shown_distractor, *sci2["unshown"]]) == sorted(payload["change_distractors"])
    assert sci2["unshown"] == [d for d in payload["change_distractors"] if d != shown_distractor]
    assert "unshown" not in resolved["sci4"] and len(resolved["sci4"]["options"]) == 4
    # The same seed and id always draw the same distractor, whatever else the payload holds.
    again = protocol.resolve_queries("80", {**payload, "category": "functional"}, seed=5)["sci2"]
    assert again == sci2
