"""Property-based tests (hypothesis) of the answer forms scoring and storage read: the canonical QA
answers and flags are fixed points (annotation.canonical); any model reply parses to a canonical
answer or to none, and a canonical answer parses to itself (protocols.kit.answers, the judge's
scores included); every workflow's result validator (annotation.results) stores a canonical JSON
result or refuses by field with ResultInvalid — never another exception. Strategies:
tests/helpers/strategies.py."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotation import canonical
from annotation.protocols import LETTERS, QA_FLAGS
from annotation.results import BoxContext, QAContext, ResultInvalid, Validated, validate_result
from protocols.kit import answers
from protocols.oscbench import CRITERIA as OSC_CRITERIA
from tests.helpers.strategies import FAST, RATING, answer_text, json_values

option_lists = st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=6)

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
    # The parser an import resolves once per protocol reads every reply the same way.
    unshown = options[:1]
    assert answers.answer_parser(protocol)("q", raw, options, fmt=fmt, unshown=unshown) == answers.parse_answer(
        protocol, "q", raw, options, fmt=fmt, unshown=unshown
    )


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
