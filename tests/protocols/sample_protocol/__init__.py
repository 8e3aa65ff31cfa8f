"""Lid check: a test-only protocol, defined here and nowhere else, that proves a new benchmark is
one package plus one line of STATELAB_PROTOCOLS (tests/protocols/test_extension.py registers it).

One image of an object and a yes/no question about its state ("Is the jar's lid open?"), verified
blind in the QA form like VisualTrans and M3-Verse; a model answers the letter of yes or no.
Spec: tests/protocols/sample_protocol/spec.md. Prompts: prompts.py; scoring: scoring.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from protocols.base import Protocol

from .fields import ITEM_FIELDS, STATES

METRICS = {
    "accuracy": ("Accuracy", "Share of questions whose yes/no answer was right."),
    **{
        f"acc_{state}": (f"Accuracy ({state})", f"Accuracy on questions about objects that are {state}.")
        for state in STATES
    },
}


class LidCheck(Protocol):
    name = "lidcheck"
    label = "Lid check (yes/no QA, tests only)"
    workflow = "qa"
    media_fields = {"image": "image"}
    item_fields = ITEM_FIELDS
    annotator_fields = ("question",)
    answer_kind = "choice"
    query_keys = ("qa",)
    settings_keys = ("suggestions",)
    metrics = METRICS
    ranking = ("accuracy",)
    human_row = True
    spec = "tests/protocols/sample_protocol/spec.md"
    samples_module = None  # no made-up dataset: the test writes its own items
    formats_module = "formats"  # a made-up authors' format, for the import and export tests

    def resolve_queries(
        self, item_id: str, payload: Mapping[str, Any], *, seed: int, vocabulary: Any = None
    ) -> dict[str, dict[str, Any]]:
        # Yes before no, always: the order a person reads them in is the order a model sees.
        return {"qa": {"options": list(payload["options"]), "answer": payload.get("answer"), "format": "choice"}}

    def chance(self, metric: str) -> Decimal | None:
        return Decimal("50.00")


protocol = LidCheck()
