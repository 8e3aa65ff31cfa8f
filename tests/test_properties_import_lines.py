"""Property-based tests (hypothesis) of the import's line checks: whatever JSON comes in as an item
line (every protocol, OSCBench's gold lines included) or as an annotation line (ratings, blind QA
answers), it is accepted in the canonical form, which checks again to itself, or refused by field
(FieldError naming the field) — never another exception; the fast path and the full item check
agree, and an imported QA answer is accepted and stored exactly as the annotator's submit would be.
Strategies: tests/helpers/strategies.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotation import canonical
from annotation.importing.annotation_lines import CheckedAnnotation, check_qa_answer, check_rating
from annotation.importing.formats import CheckedItem, _check_item_full, check_item
from annotation.importing.samples import sample_line
from annotation.protocols import QA_FLAGS, qa_shape
from annotation.results import QAContext, ResultInvalid, validate_result
from protocols.fields import FieldError
from protocols.oscbench import CRITERIA as OSC_CRITERIA
from protocols.oscbench import NULLABLE as OSC_NULLABLE
from tests.helpers.strategies import FAST, RATING, json_values, near_valid_items, near_valid_ratings

PROTOCOLS = ("status", "changeit", "visualtrans", "m3verse", "oscbench")


def item_lines(protocol: str):
    return near_valid_items(protocol) | json_values


def assert_field_errors(errors) -> None:
    assert isinstance(errors, list) and errors, errors
    for e in errors:
        assert isinstance(e, FieldError) and isinstance(e.field, str)  # (an unknown key "" is named "")
        assert isinstance(e.reason, str) and e.reason.strip()


# ---------------------------------------------------------------------------------------------
# Item lines (annotation.importing.formats): every protocol


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("verified", [False, True])
@FAST
@given(data=st.data())
def test_item_line_is_checked_or_refused_by_field(protocol, verified, data):
    obj = data.draw(item_lines(protocol))
    out = check_item(protocol, obj, verified=verified)
    full = _check_item_full(protocol, obj, verified=verified)
    if isinstance(out, CheckedItem):
        # The fast path and the full check accept the same lines with the same result.
        assert isinstance(full, CheckedItem) and full == out
        assert isinstance(out.external_id, str) and out.external_id
        assert isinstance(out.payload, dict) and json.loads(json.dumps(out.payload)) == out.payload
        for field_name, relpath, kind in out.media_paths:
            assert isinstance(relpath, str) and "\x00" not in relpath and kind in ("image", "video")
        # Canonical: the stored payload checks again to itself.
        again = check_item(
            protocol,
            {"id": out.external_id, **out.payload, "split": out.split, "tags": out.tags, "gold": out.gold},
            verified=verified,
        )
        assert isinstance(again, CheckedItem) and again.payload == out.payload
    else:
        assert_field_errors(out)
        assert not isinstance(full, CheckedItem)


@st.composite
def oscbench_gold_lines(draw):
    """An OSCBench line with a gold flag and expected scores, each valid, near valid or anything."""
    line = sample_line("oscbench", draw(st.integers(0, 40)))
    valid = st.dictionaries(st.sampled_from(OSC_CRITERIA), st.integers(1, 5), min_size=1, max_size=8).map(
        lambda d: {**d, **{c: None for c in OSC_NULLABLE if c in d and d[c] == 3}}
    )  # some N/A
    near = st.dictionaries(
        st.sampled_from(OSC_CRITERIA) | st.text(max_size=8),
        st.sampled_from([None, 1, 3, 5, 0, 6, True, 2.0, "4"]),
        max_size=4,
    )
    gold = draw(st.sampled_from([True, True, False, None]) | json_values)
    if gold is not None:
        line["gold"] = gold
    scores = draw(st.sampled_from(["valid", "valid", "absent", "near", "any"]))
    if scores != "absent":
        line["gold_scores"] = draw({"valid": valid, "near": near, "any": json_values}[scores])
    return line


@FAST
@given(obj=oscbench_gold_lines())
def test_oscbench_gold_line_is_checked_or_refused_by_field(obj):
    out = check_item("oscbench", obj)
    full = _check_item_full("oscbench", obj)
    if isinstance(out, CheckedItem):
        assert isinstance(full, CheckedItem) and full == out
        expected = out.payload.get("gold_scores")
        assert out.gold is (expected is not None)  # a gold item has its expected scores, nothing else has them
        if expected is not None:
            assert expected and list(expected) == [c for c in OSC_CRITERIA if c in expected]
            assert all(canonical.is_score(v) or (v is None and c in OSC_NULLABLE) for c, v in expected.items())
        again = check_item(
            "oscbench", {"id": out.external_id, **out.payload, "split": out.split, "tags": out.tags, "gold": out.gold}
        )
        assert isinstance(again, CheckedItem) and again == out
    else:
        assert_field_errors(out)
        assert not isinstance(full, CheckedItem)
        assert {e.field for e in out} <= {"gold", "gold_scores"}


MEDIA_FIELDS = {"status": "image_a", "changeit": "image", "m3verse": "video_before", "oscbench": "video"}


@pytest.mark.parametrize("protocol", sorted(MEDIA_FIELDS))
def test_a_nul_byte_in_a_media_path_is_refused_by_field(protocol):
    line = sample_line(protocol, 1)
    line[MEDIA_FIELDS[protocol]] += "\x00"
    out = check_item(protocol, line)
    assert not isinstance(out, CheckedItem)
    assert [e.field for e in out] == [MEDIA_FIELDS[protocol]]


# ---------------------------------------------------------------------------------------------
# Annotation lines (annotation.importing.annotation_lines): ratings and blind QA answers


@FAST
@given(obj=near_valid_ratings() | st.dictionaries(st.text(max_size=10), json_values, max_size=5))
def test_rating_line_is_checked_or_refused_by_field(obj):
    out = check_rating(obj, RATING)
    if isinstance(out, CheckedAnnotation):
        assert list(out.result) == ["scores"] and list(out.result["scores"]) == list(OSC_CRITERIA)
        assert all(canonical.is_score(v) or (v is None and c in OSC_NULLABLE) for c, v in out.result["scores"].items())
        assert check_rating({"item": out.item, "rater": out.rater, **out.result}, RATING).result == out.result
    else:
        assert_field_errors(out)


@pytest.mark.parametrize("protocol", ["visualtrans", "m3verse"])
@FAST
@given(data=st.data())
def test_qa_answer_line_is_checked_or_refused_by_field(protocol, data):
    # The item is one the importer accepted (the stored payload is what an answer is checked against).
    payload = check_item(protocol, sample_line(protocol, data.draw(st.integers(0, 40))), verified=True).payload
    obj = {
        "item": data.draw(st.sampled_from(["it-1", "", 7])),
        "annotator": data.draw(st.sampled_from(["a1", None, ""])),
        "answer": data.draw(json_values | st.sampled_from(["b", "a, c", "A;C", ["c", "a"], 2, "cup, jar"])),
        "flags": data.draw(st.lists(st.sampled_from(QA_FLAGS + ("bogus",)), max_size=3) | json_values),
    }
    if data.draw(st.booleans()):
        obj[data.draw(st.text(max_size=8))] = data.draw(json_values)
    out = check_qa_answer(obj, protocol, payload)
    if isinstance(out, CheckedAnnotation):
        flags = out.result.get("flags", [])
        assert flags == canonical.qa_flags(flags)
        assert out.result["answer"] is not None or flags  # no answer only with a flag
        again = check_qa_answer({"item": out.item, "annotator": out.rater, **out.result}, protocol, payload)
        assert isinstance(again, CheckedAnnotation) and again.result == out.result
    else:
        assert_field_errors(out)


def test_an_empty_set_answer_is_stored_as_it_is_checked():
    # An empty set is no answer (annotation.canonical): refused without a flag, by field, as the
    # submit refuses it; with a flag stored as null, which checks again to itself.
    payload = check_item("visualtrans", sample_line("visualtrans", 2), verified=True).payload
    assert payload["format"] == "set"
    shape = QAContext("set", 0, False)
    for empty in ([], ["  ", ""], ", ,", ""):
        out = check_qa_answer({"item": "it-1", "annotator": "a1", "answer": empty, "flags": []}, "visualtrans", payload)
        with pytest.raises(ResultInvalid) as refused:
            validate_result("qa", {"answer": empty, "flags": []}, shape)
        assert list(refused.value.errors) == ["answer"]
        assert out == [FieldError("answer", refused.value.errors["answer"])], empty

        flagged = check_qa_answer(
            {"item": "it-1", "annotator": "a1", "answer": empty, "flags": ["ambiguous"]}, "visualtrans", payload
        )
        assert isinstance(flagged, CheckedAnnotation) and flagged.result == {"answer": None, "flags": ["ambiguous"]}
        again = check_qa_answer({"item": "it-1", "annotator": "a1", **flagged.result}, "visualtrans", payload)
        assert isinstance(again, CheckedAnnotation) and again.result == flagged.result
        assert validate_result("qa", {"answer": empty, "flags": ["ambiguous"]}, shape).result == flagged.result


@pytest.mark.parametrize("protocol", ["visualtrans", "m3verse"])
@FAST
@given(data=st.data())
def test_an_imported_qa_answer_is_accepted_and_stored_as_its_submit(protocol, data):
    # The same answer to the same item: the import accepts it iff the annotator's submit does,
    # and both store the same result.
    line = sample_line(protocol, data.draw(st.integers(0, 40)))
    if protocol == "m3verse":
        line["multiple"] = data.draw(st.sampled_from([True, False, None]))
    payload = check_item(protocol, {k: v for k, v in line.items() if v is not None}, verified=True).payload
    answer = data.draw(
        json_values
        | st.sampled_from(
            [
                "b",
                "a, c",
                "A;C",
                ["c", "a"],
                ["A", "A"],
                2,
                "3",
                [],
                "",
                ["  "],
                "cup, jar",
                ["cup", " big  bowl"],
                ["D"],
            ]
        )
    )
    flags = data.draw(st.lists(st.sampled_from(QA_FLAGS), max_size=2, unique=True))
    shape = qa_shape(protocol=protocol, payload=payload)
    try:
        submitted = validate_result("qa", {"answer": answer, "flags": flags}, QAContext.of(shape)).result
    except ResultInvalid:
        submitted = None
    out = check_qa_answer({"item": "it-1", "annotator": "a1", "answer": answer, "flags": flags}, protocol, payload)
    if submitted is None:
        assert_field_errors(out)
        assert [e.field for e in out] == ["answer"]
    else:
        assert isinstance(out, CheckedAnnotation) and out.result == submitted
