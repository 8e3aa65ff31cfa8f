"""Gold pairs: an arena item may carry its known better side (`gold_winner`) when it is gold, and
only then; a vote on it is checked against that side (crowd studies' gold checks, the rater
screen)."""

from __future__ import annotations

from annotation.agreement import gold_correct
from annotation.importing.formats import check_item

LINE = {
    "id": "g1",
    "prompt": "A lemon is sliced",
    "model_a": "gen-x",
    "model_b": "gen-y",
    "video_a": "a.mp4",
    "video_b": "b.mp4",
}


def test_a_gold_pair_keeps_its_known_side_in_the_payload():
    checked = check_item("arena", {**LINE, "gold": True, "gold_winner": "b"}, strict=True)
    assert not isinstance(checked, list), checked
    assert checked.payload["gold_winner"] == "b" and "extra" not in checked.payload


def test_a_known_side_needs_a_gold_item_and_a_gold_item_needs_its_side():
    errors = check_item("arena", {**LINE, "gold_winner": "a"})
    assert isinstance(errors, list) and [e.field for e in errors] == ["gold_winner"]
    assert "gold" in errors[0].reason
    errors = check_item("arena", {**LINE, "gold": True})
    assert isinstance(errors, list) and "gold_winner" in " ".join(e.reason for e in errors)
    errors = check_item("arena", {**LINE, "gold": True, "gold_winner": "left"})
    assert isinstance(errors, list) and [e.field for e in errors] == ["gold_winner"]


def test_a_vote_on_a_gold_pair_is_right_only_for_the_known_side():
    payload = {**LINE, "gold_winner": "a"}
    assert gold_correct("pairwise", payload, {"winner": "a"}, protocol="arena") is True
    assert gold_correct("pairwise", payload, {"winner": "tie"}, protocol="arena") is False
    assert gold_correct("pairwise", payload, {"winner": "b"}, protocol="arena") is False
    assert gold_correct("pairwise", LINE, {"winner": "a"}, protocol="arena") is None
