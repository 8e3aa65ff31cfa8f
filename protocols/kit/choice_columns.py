"""A choice protocol's board inputs as arrays: what a scoring module's ``score_columns`` reads instead
of ``ScoringItem`` records and a mapping of ``ModelAnswer`` objects. Plain numpy, no Django.

The evaluation layer fills them straight from the database (evaluation/scoring/arrays.py); one row
per release item in release order, one column per query of the protocol (``Protocol.query_keys``).
Letter codes: A=0, B=1, ... in the release's option order; -1 = no answer, unreadable or out of
range.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ChoiceItems:
    """The release's side: items, their resolved queries and the labels scoring groups them by."""

    queries: tuple[str, ...]  # the protocol's query keys: the columns below
    key_order: tuple[int, ...]  # columns in the order the items' resolved queries are stored
    item_ids: np.ndarray  # (N,) int64 item keys, release order
    truth: np.ndarray  # (N, Q) int8 letter codes of the known answers
    n_options: np.ndarray  # (N, Q) int16 options shown per query
    labels: dict[str, np.ndarray] = field(default_factory=dict)  # payload field -> (N,) int16 index, -1 none

    @property
    def n(self) -> int:
        return int(self.item_ids.shape[0])


@dataclass
class ChoiceAnswers:
    """One answer set over ``ChoiceItems``: each prediction mapped to the release's option order."""

    predicted: np.ndarray  # (N, Q) int8 letter codes; -1 missing, failed or unreadable
    has_logprobs: np.ndarray  # (N, Q) bool: log-probs were stored with the answer
    logprob_a: np.ndarray  # (N, Q) float64 log P(release option A) under the letter seen; NaN unknown


def label_values(codes: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """Label codes back to an object array of names (None where the item has none)."""
    table = np.array([*names, None], dtype=object)
    return table[np.where(codes >= 0, codes, len(names))]
