"""ChangeIt's part of its lmms-eval task's utils.py: per candidates × condition, state accuracy (the
chosen number is the true label's) and object accuracy (the chosen label names the item's object:
`label_objects.json`, the release's vocabulary, or one of the item's distractors), each over all
items; a query with no document (a crop of an item without a usable box) is wrong and a parse
failure, as a missing answer is in StateLab (protocols/changeit/scoring.py;
docs/protocols/changeit.md).

Standalone code (standard library only): the exporter appends this file to the generic part,
protocols/kit/lmms_utils.py, leaving out the import of it below, and lmms-eval loads the result
without StateLab (see that module's docstring). Answers are read by the generic part (a candidate
number each).
"""

from __future__ import annotations

import functools
import json
import os
from decimal import Decimal
from fractions import Fraction
from typing import Any

from protocols.kit.lmms_utils import HERE, percent

QUERIES = tuple(f"state:{s}:{c}" for s in ("standard", "distractor") for c in ("full", "crop"))
METRICS = tuple(f"{kind}_acc_{q.split(':')[1]}_{q.split(':')[2]}" for kind in ("state", "object") for q in QUERIES)


@functools.lru_cache(maxsize=1)
def label_objects() -> dict[str, str]:
    """label -> object of the release (the writer's label_objects.json), read once."""
    try:
        with open(os.path.join(HERE, "label_objects.json"), encoding="utf-8") as fh:
            return dict(json.load(fh))
    except OSError:
        return {}


def object_credit(doc: dict, parsed: Any) -> int:
    """Whether the chosen candidate names the item's object: a state label of that object in the
    release's vocabulary, or one of the item's own distractors (protocols/changeit/scoring.py)."""
    options = list(doc.get("options") or [])
    if not isinstance(parsed, int) or not 1 <= parsed <= len(options):
        return 0
    meta = json.loads(doc.get("meta") or "{}")
    label = options[parsed - 1]
    return int(label in (meta.get("distractors") or []) or label_objects().get(label) == meta.get("object"))


def extra(doc: dict, parsed: Any) -> dict:
    return {"object": object_credit(doc, parsed)}


def missing(records: list[dict]) -> int:
    """The crop queries of items without a usable box (they have no document)."""
    return len(QUERIES) * len({r["id"] for r in records}) - len(records)


def accuracy(records: list[dict], key: str) -> Fraction:
    """State or object accuracy over every item (a query without a record counts as wrong)."""
    kind, _, rest = key.split("_", 2)
    query = "state:" + rest.replace("_", ":")
    field = "num" if kind == "state" else "object"
    n = len({r["id"] for r in records})
    return Fraction(sum(r[field] for r in records if r["query"] == query), n)


def printed(records: list[dict], key: str) -> Decimal | None:
    return percent(accuracy(records, key))
