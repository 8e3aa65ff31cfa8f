"""Hypothesis strategies and settings shared by the property tests (tests/test_properties_*.py):
JSON values of every kind, text that looks like what models and people write, item and rating lines
that are valid or a few edits away from it, and the rating context they are checked in. Examples are
derandomized (the same on every run and in CI) and few enough to stay fast."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from annotation.importing.samples import sample_line
from annotation.results import RatingContext
from protocols.oscbench import CRITERIA as OSC_CRITERIA
from protocols.oscbench import NULLABLE as OSC_NULLABLE

RATING = RatingContext(criteria=OSC_CRITERIA, nullable=OSC_NULLABLE)

FAST = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

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
