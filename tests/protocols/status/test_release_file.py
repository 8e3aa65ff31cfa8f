"""The real STATUS_Bench.json (tests/fixtures/authors/, byte-identical to the authors' file): every
row converts into a valid complete item, the release writes back byte for byte, and the answer
parser reads replies to the 17 items whose change text lies inside a distractor as a careful
grader would (docs/protocols/status.md, "Answer parsing")."""

from __future__ import annotations

import hashlib

import pytest

from annotation.importing.formats import CheckedItem, check_item
from protocols.base import LETTERS
from protocols.kit.answers import parse_answer
from protocols.normalize import answer_text
from protocols.status import formats, protocol, sci2_distractor

from .authors import FIXTURE

FORMAT = formats.FORMATS[0]
SEED = 0
# Items whose right change's text occurs inside one of their distractors (case folded), found by
# reading the file: "fully retract the tape measure" in "almost fully retract the tape measure" (50),
# "fully open the cracked egg" in "carefully open the cracked egg to separate the egg white" (3).
NESTED = [3, 15, 50, 79, 80, 93, 137, 166, 239, 245, 260, 269, 298, 332, 342, 378, 402]


@pytest.fixture(scope="module")
def lines():
    return list(FORMAT.read(FIXTURE).lines)


def test_the_fixture_is_the_authors_file():
    digest = hashlib.sha256(FIXTURE.read_bytes()).hexdigest()
    assert digest == "8c238e9dfa8e3b9c96c8add8f9cd5159ae4d09751d4fe62e65f6dc0e8796e14a"


def test_all_404_rows_convert_into_complete_items_without_an_error(lines):
    assert FORMAT.detect(FIXTURE)
    assert len(lines) == 404
    assert [line["id"] for line in lines] == [str(i) for i in range(404)]
    for line in lines:
        # The generic importer stores "extra" itself; the protocol's fields are checked as any line's.
        fields = {k: v for k, v in line.items() if k != "extra"}
        checked = check_item("status", fields, verified=True)
        assert isinstance(checked, CheckedItem), (line["id"], checked)
        assert checked.complete and checked.media_paths[0][1] == f"images/ex_{int(line['id']):04d}_0.png"
        assert set(line["extra"]) == {
            "id",
            "dataset",
            "video_id",
            "frame_0",
            "frame_1",
            "image_0",
            "image_1",
            "diff_cap",
        }


def test_the_release_writes_back_byte_for_byte(lines, tmp_path):
    FORMAT.write(lines, tmp_path)
    assert (tmp_path / "STATUS_Bench.json").read_bytes() == FIXTURE.read_bytes()


def test_the_seventeen_nested_items_are_the_ones_the_parser_must_tell_apart(lines):
    nested = [
        int(line["id"])
        for line in lines
        if any(answer_text(line["change"]) in answer_text(d) for d in line["change_distractors"])
    ]
    assert nested == NESTED


def _phrasings(text: str) -> list[str]:
    return [text, f"{text}.", f"The person will {text}.", f"Answer: {text}", f"**{text.capitalize()}**"]


def test_sci4_reads_every_option_named_in_free_text_as_that_option(lines):
    for line in lines:
        resolved = protocol.resolve_queries(line["id"], line, seed=SEED)["sci4"]
        options = resolved["options"]
        for i, option in enumerate(options):
            expected = LETTERS[i] if options.count(option) == 1 else None  # id 272 lists one text twice
            for reply in _phrasings(option):
                assert parse_answer("status", "sci4", reply, options) == expected, (line["id"], reply)


def test_the_nested_items_read_right_on_both_sci_queries(lines):
    for line in (lines[i] for i in NESTED):
        item_id, change = line["id"], line["change"]
        queries = protocol.resolve_queries(item_id, line, seed=SEED)
        sci2, sci4 = queries["sci2"], queries["sci4"]
        # SCI-4: the distractor holding the change's text is its own option, not a parse failure.
        for distractor in line["change_distractors"]:
            wrong = LETTERS[sci4["options"].index(distractor)]
            assert wrong != sci4["answer"]
            assert parse_answer("status", "sci4", f"They {distractor}.", sci4["options"]) == wrong
        assert parse_answer("status", "sci4", f"They {change}.", sci4["options"]) == sci4["answer"]
        # SCI-2: a distractor the query did not show is wrong, never the change it contains.
        shown = sci2["options"]
        assert sci2["unshown"] == [d for d in line["change_distractors"] if d not in shown]
        for distractor in sci2["unshown"]:
            reply = f"They {distractor}."
            assert parse_answer("status", "sci2", reply, shown, unshown=sci2["unshown"]) is None
        assert parse_answer("status", "sci2", f"They {change}.", shown, unshown=sci2["unshown"]) == sci2["answer"]


def test_the_case_the_old_rule_credited_is_now_wrong(lines):
    line = lines[50]  # change "fully retract the tape measure"
    assert line["change"] == "fully retract the tape measure"
    almost = "almost fully retract the tape measure"
    shown = [line["change"], "slightly retract the tape measure"]
    assert parse_answer("status", "sci2", almost, shown, unshown=[almost, "retract the tape measure halfway"]) is None
    # Without the unshown texts the parser cannot know the reply names another candidate.
    assert parse_answer("status", "sci2", almost, shown) == "A"
    egg = lines[3]
    assert egg["change"] == "fully open the cracked egg"
    careful = "carefully open the cracked egg to separate the egg white"
    options = [egg["change"], careful]
    assert parse_answer("status", "sci2", f"I would {careful}", options) == "B"
    assert parse_answer("status", "sci2", "They carefully open the cracked egg.", options) is None


def test_the_sci2_distractor_is_drawn_per_item_from_the_seed(lines):
    picks = [sci2_distractor(line["id"], seed=SEED) for line in lines]
    # Every position is drawn, none always: the authors' alphabetical order picks no caption.
    assert {p: picks.count(p) for p in range(3)} == {0: 129, 1: 127, 2: 148}
    for line, pick in zip(lines, picks, strict=True):
        sci2 = protocol.resolve_queries(line["id"], line, seed=SEED)["sci2"]
        assert sorted(sci2["options"]) == sorted([line["change"], line["change_distractors"][pick]])
    other_seed = [sci2_distractor(line["id"], seed=SEED + 1) for line in lines]
    assert other_seed != picks
