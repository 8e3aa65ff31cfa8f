"""Property-based tests (hypothesis) of every importer, answer parser and result validator.

Whatever JSON or text comes in, each one either accepts it with a value in the canonical form or
refuses it in the project's own terms (FieldError / ImportRefused naming the line and field,
ResultInvalid naming the field) — never another exception. Plus round trips: the canonical forms
are fixed points, and a valid generated item survives import -> freeze -> export.

Examples are derandomized (the same on every run and in CI) and few enough to stay fast.
"""

from __future__ import annotations

import itertools
import json
import re
import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from annotation import canonical
from annotation.importing.annotation_lines import CheckedAnnotation, check_qa_answer, check_rating
from annotation.importing.formats import CheckedItem, _check_item_full, check_item
from annotation.importing.samples import sample_line
from annotation.protocols import LETTERS, QA_FLAGS, qa_shape
from annotation.results import BoxContext, QAContext, RatingContext, ResultInvalid, Validated, validate_result
from protocols.fields import FieldError
from protocols.kit import answers
from protocols.oscbench import CRITERIA as OSC_CRITERIA
from protocols.oscbench import NULLABLE as OSC_NULLABLE

RATING = RatingContext(criteria=OSC_CRITERIA, nullable=OSC_NULLABLE)

PROTOCOLS = ("status", "changeit", "visualtrans", "m3verse", "oscbench")
FAST = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------------------------
# Strategies

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
# Text that looks like what models and people write: letters, digits, separators, JSON fragments.
answer_text = st.text(alphabet=string.ascii_letters + string.digits + " ,;:.()[]{}\"'\n-*#/\x00é", max_size=60)
option_lists = st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=6)


@st.composite
def near_valid_items(draw, protocol: str):
    """A valid sample line, then zero to three edits: a field dropped, retyped or added."""
    line = sample_line(protocol, draw(st.integers(0, 40)), complete=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(("drop", "replace", "add")))
        keys = sorted(line)
        if action == "drop" and keys:
            line.pop(draw(st.sampled_from(keys)))
        elif action == "replace" and keys:
            line[draw(st.sampled_from(keys))] = draw(json_values)
        elif action == "add":
            line[draw(st.text(max_size=12))] = draw(json_values)
    return line


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


@st.composite
def near_valid_ratings(draw):
    line = {
        "item": "osc-1",
        "rater": "r1",
        "scores": {
            c: draw(st.sampled_from([1, 2, 3, 4, 5] + ([None] if c in OSC_NULLABLE else []))) for c in OSC_CRITERIA
        },
    }
    for _ in range(draw(st.integers(0, 3))):
        target = draw(st.sampled_from(("line", "scores")))
        where = line if target == "line" else line["scores"] if isinstance(line.get("scores"), dict) else line
        key = draw(st.sampled_from(sorted(where) or ["x"]) | st.text(max_size=10))
        if draw(st.booleans()):
            where.pop(key, None)
        else:
            where[key] = draw(json_values)
    return line


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


# ---------------------------------------------------------------------------------------------
# Canonical answers (annotation.canonical)


@FAST
@given(
    answer=json_values | st.sampled_from(["b", "a, c", " A;C ", ["c", "a"], "12", " 3 ", "cup,  jar ,"]),
    fmt=st.sampled_from(["choice", "count", "set"]),
    multiple=st.booleans(),
)
def test_qa_answer_canonical_form_is_a_fixed_point(answer, fmt, multiple):
    once = canonical.qa_answer(answer, fmt=fmt, multiple=multiple)
    assert canonical.qa_answer(once, fmt=fmt, multiple=multiple) == once


@FAST
@given(flags=st.lists(st.sampled_from(QA_FLAGS + ("other",)), max_size=6))
def test_qa_flags_canonical_form_is_a_fixed_point(flags):
    once = canonical.qa_flags(flags)
    assert canonical.qa_flags(once) == once and set(once) == set(flags) & set(QA_FLAGS)


# ---------------------------------------------------------------------------------------------
# Answer parsers (protocols.kit.answers, which scoring reads)


def assert_canonical_answer(protocol: str, value, options: list, fmt: str | None) -> None:
    if value is None:
        return
    if protocol == "status" or (protocol == "visualtrans" and fmt == "choice"):
        assert value in LETTERS[: len(options)]
    elif protocol == "changeit":
        assert type(value) is int and 1 <= value <= len(options)
    elif protocol == "visualtrans" and fmt == "count":
        assert type(value) is int
    elif protocol == "visualtrans":
        assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif protocol == "m3verse":
        assert isinstance(value, list) and value == sorted(set(value)) and set(value) <= set(LETTERS[: len(options)])
    elif protocol == "oscbench":
        assert list(value) == list(OSC_CRITERIA)
        assert all(v is None or (type(v) is int and 1 <= v <= 5) for v in value.values())


@pytest.mark.parametrize(
    "protocol,fmt",
    [
        ("status", None),
        ("changeit", None),
        ("visualtrans", "choice"),
        ("visualtrans", "count"),
        ("visualtrans", "set"),
        ("m3verse", None),
        ("oscbench", None),
    ],
)
@FAST
@given(raw=answer_text | json_values | st.builds(json.dumps, json_values), options=option_lists)
def test_model_reply_parses_to_a_canonical_answer_or_none(protocol, fmt, raw, options):
    value = answers.parse_answer(protocol, "q", raw, options, fmt=fmt)
    assert_canonical_answer(protocol, value, options, fmt)


@pytest.mark.parametrize(
    "protocol,fmt", [("status", None), ("visualtrans", "choice"), ("m3verse", None), ("changeit", None)]
)
@FAST
@given(
    options=st.lists(
        st.text(alphabet=string.ascii_lowercase + " ", min_size=3, max_size=15), min_size=2, max_size=6, unique=True
    ),
    data=st.data(),
)
def test_a_canonical_answer_parses_to_itself(protocol, fmt, options, data):
    n = len(options)
    if protocol == "changeit":
        value = data.draw(st.integers(1, n))
        raw = str(value)
    elif protocol == "m3verse":
        value = sorted(data.draw(st.sets(st.sampled_from(LETTERS[:n]), min_size=1)))
        raw = json.dumps(value)
    else:
        value = data.draw(st.sampled_from(LETTERS[:n]))
        raw = value
    assert answers.parse_answer(protocol, "q", raw, options, fmt=fmt) == value


@FAST
@given(
    raw=answer_text
    | st.builds(json.dumps, json_values)
    | st.builds(
        json.dumps,
        st.fixed_dictionaries({c: st.integers(0, 6) | st.none() | st.text(max_size=3) for c in OSC_CRITERIA}),
    )
)
def test_judge_reply_parses_to_scores_or_none(raw):
    value = answers.parse_judge(raw, OSC_CRITERIA)
    assert_canonical_answer("oscbench", value, [], None)


# ---------------------------------------------------------------------------------------------
# Result validators (annotation.results), one per workflow


def contexts(workflow: str):
    if workflow == "box":
        return st.builds(
            BoxContext,
            width=st.none() | st.integers(1, 4000),
            height=st.none() | st.integers(1, 4000),
            labels=st.lists(st.text(min_size=1, max_size=12), max_size=4).map(tuple),
        )
    if workflow == "qa":
        return st.builds(
            QAContext,
            format=st.sampled_from(["choice", "count", "set"]),
            n_options=st.integers(0, 8),
            multiple=st.booleans(),
        )
    if workflow == "rating":
        return st.just(RATING)
    return st.none()


@st.composite
def near_valid_results(draw, workflow: str):
    from tests.annotation.work_factories import valid_result

    result = valid_result(workflow, draw(st.integers(0, 3)))
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(sorted(result) or [""]) | st.text(max_size=10))
        if draw(st.booleans()):
            result.pop(key, None)
        else:
            result[key] = draw(json_values | st.sampled_from(["B", "a,c", 3, [1, 2, 3, 4], "\x00"]))
    return result


@pytest.mark.parametrize("workflow", ["quintuplet", "box", "qa", "rating"])
@FAST
@given(data=st.data())
def test_result_is_validated_or_refused_by_field(workflow, data):
    ctx = data.draw(contexts(workflow))
    result = data.draw(near_valid_results(workflow) | json_values)
    try:
        out = validate_result(workflow, result, ctx)
    except ResultInvalid as exc:
        assert exc.errors and all(isinstance(k, str) and isinstance(v, str) and v for k, v in exc.errors.items())
        return
    assert isinstance(out, Validated) and isinstance(out.result, dict)
    assert json.loads(json.dumps(out.result)) == out.result  # stored as JSON as it is
    assert validate_result(workflow, out.result, ctx).result == out.result  # the stored form is canonical


# ---------------------------------------------------------------------------------------------
# Whole files (annotation.importing.items_import / annotations_import) against PostgreSQL

LINE_OR_FILE = re.compile(r"^(line \d+|file|[\w./-]+): field .*: .+", re.S)
DB = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def sample_media(tmp_path_factory):
    """Sample media per protocol, written once for the module (the JSONL files go beside them)."""
    from annotation.importing.samples import write_sample_media

    roots = {}
    for protocol in ("status", "visualtrans"):
        roots[protocol] = tmp_path_factory.mktemp(f"media-{protocol}")
        write_sample_media(roots[protocol], protocol, distinct=4)
    return roots


@pytest.mark.django_db
@pytest.mark.parametrize("protocol", ["status", "visualtrans"])
@DB
@given(data=st.data())
def test_item_file_is_imported_whole_or_refused_naming_line_and_field(protocol, data, make_project, sample_media):
    from annotation.importing import ImportRefused, items_import
    from annotation.models import Item, MediaAsset, Project

    lines = data.draw(
        st.lists(
            near_valid_items(protocol).map(json.dumps) | answer_text | st.builds(json.dumps, json_values),
            min_size=1,
            max_size=4,
        )
    )
    path = sample_media[protocol] / "items.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    project = Project.objects.filter(slug=f"prop-{protocol}").first() or make_project(f"prop-{protocol}", protocol)
    before = (Item.objects.count(), MediaAsset.objects.count())
    try:
        report = items_import(project=project, path=path)
    except ImportRefused as exc:
        assert exc.errors and all(LINE_OR_FILE.match(m) for m in exc.errors), exc.errors
        assert (Item.objects.count(), MediaAsset.objects.count()) == before  # all or nothing
    else:
        assert report is not None


@pytest.mark.django_db
@DB
@given(
    lines=st.lists(
        near_valid_ratings().map(json.dumps) | answer_text | st.builds(json.dumps, json_values), min_size=1, max_size=4
    )
)
def test_rating_file_is_imported_whole_or_refused_naming_line_and_field(lines, make_project, tmp_path_factory):
    from annotation.importing import ImportRefused, annotations_import
    from annotation.models import Annotation, Item, Project

    project = Project.objects.filter(slug="prop-ratings").first()
    if project is None:
        project = make_project("prop-ratings", "oscbench")
        Item.objects.create(project=project, external_id="osc-1", payload=sample_line("oscbench", 1))
    path = tmp_path_factory.mktemp("ratings") / "ratings.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = Annotation.objects.count()
    try:
        annotations_import(project=project, path=path)
    except ImportRefused as exc:
        assert exc.errors and all(LINE_OR_FILE.match(m) for m in exc.errors), exc.errors
        assert Annotation.objects.count() == before


_roundtrips = itertools.count()


@st.composite
def valid_status_lines(draw):
    words = st.text(alphabet=string.ascii_letters + " éü-", min_size=3, max_size=40).filter(lambda s: s.strip())
    line = sample_line("status", draw(st.integers(0, 7)))
    line.update(
        state_a=draw(words),
        state_b=draw(words),
        change=draw(words),
        change_distractors=draw(st.lists(words, min_size=3, max_size=3)),
        difference=draw(st.sampled_from(["slight", "significant"])),
    )
    return line


@pytest.mark.django_db
@DB
@given(line=valid_status_lines())
def test_valid_item_survives_import_freeze_export(line, make_project, sample_media):
    from annotation.importing import items_import
    from annotation.releases import release_freeze, release_lines

    checked = check_item("status", line, verified=True)
    assume(isinstance(checked, CheckedItem))
    path = sample_media["status"] / "roundtrip.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    project = make_project(f"roundtrip-{next(_roundtrips)}", "status")
    items_import(project=project, path=path, verified=True)
    release = release_freeze(project=project, version="v1")
    exported = [row for row in release_lines(release) if row.get("id") == line["id"]]
    assert len(exported) == 1
    for name in ("state_a", "state_b", "change", "change_distractors", "category", "difference"):
        assert exported[0][name] == checked.payload[name]
