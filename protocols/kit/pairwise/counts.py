"""Pairwise votes as counts per (pair, outcome): the one input every rating figure is computed from.

A vote compares two models and says ``a`` (the first shown won), ``b`` (the second won), ``tie`` or
``both_bad``. Which side a model was shown on does not enter the rating model, so every pair is
stored once, ordered by model index (``first < second``), with a vote for ``b`` counted as a win of
``second``. Work is then per pair, not per vote: 140,000 votes among 25 models are 300 rows.

Definitions: docs/statistics.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

OUTCOMES = ("a", "b", "tie", "both_bad")  # the vote's words; their position is the outcome's code


@dataclass(frozen=True)
class PairCounts:
    """Counts per compared pair. Arrays of length P (pairs with at least one vote), int64."""

    models: tuple[str, ...]
    first: np.ndarray  # model index, first < second
    second: np.ndarray
    wins: np.ndarray  # first preferred
    losses: np.ndarray  # second preferred
    ties: np.ndarray  # "tie"
    both_bad: np.ndarray  # "both bad": a tie for the fit, reported apart

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def fit_ties(self) -> np.ndarray:
        """Ties as the rating model sees them: "tie" and "both bad" together."""
        return self.ties + self.both_bad

    @property
    def totals(self) -> np.ndarray:
        return self.wins + self.losses + self.ties + self.both_bad

    def per_model(self) -> dict[str, np.ndarray]:
        """Per model (length K): battles, wins, losses, ties, both_bad."""
        k = self.n_models

        def add(on_first: np.ndarray, on_second: np.ndarray) -> np.ndarray:
            return np.bincount(self.first, on_first, k) + np.bincount(self.second, on_second, k)

        return {
            "battles": add(self.totals, self.totals).astype(np.int64),
            "wins": add(self.wins, self.losses).astype(np.int64),
            "losses": add(self.losses, self.wins).astype(np.int64),
            "ties": add(self.ties, self.ties).astype(np.int64),
            "both_bad": add(self.both_bad, self.both_bad).astype(np.int64),
        }

    def win_rates(self) -> np.ndarray:
        """Per model: (wins + half of all ties, both bad included) / battles."""
        m = self.per_model()
        return (m["wins"] + 0.5 * (m["ties"] + m["both_bad"])) / m["battles"]

    def matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """(win_rate, battles), K x K: row model against column model, ties as half a win;
        NaN where a pair never met (and on the diagonal)."""
        k = self.n_models
        battles = np.zeros((k, k), dtype=np.int64)
        battles[self.first, self.second] = self.totals
        battles[self.second, self.first] = self.totals
        half = 0.5 * self.fit_ties
        score = np.zeros((k, k))
        score[self.first, self.second] = self.wins + half
        score[self.second, self.first] = self.losses + half
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(battles > 0, score / np.maximum(battles, 1), np.nan)
        return rate, battles

    def with_counts(self, wins, losses, ties, both_bad) -> PairCounts:
        """The same pairs with other counts (the vote-flip search changes votes this way)."""
        return PairCounts(self.models, self.first, self.second, wins, losses, ties, both_bad)


def _model_names(models: Sequence[str]) -> tuple[str, ...]:
    names = tuple(str(m) for m in models)
    if len(names) < 2:
        raise ValueError(
            f"pairwise ratings need at least two models; got {len(names)}" + (f" ({names[0]!r})" if names else "")
        )
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"model {name!r} is listed twice; model names must be unique")
        seen.add(name)
    return names


def _indices(values, names: tuple[str, ...], what: str) -> np.ndarray:
    """Model indices from indices or names; refuses an unknown name or an index out of range."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional; got shape {arr.shape}")
    if arr.dtype.kind in "US" or arr.dtype == object:
        lookup = {name: i for i, name in enumerate(names)}
        out = np.empty(arr.shape[0], dtype=np.int64)
        for pos, value in enumerate(arr.tolist()):
            if isinstance(value, str):
                if value not in lookup:
                    raise ValueError(f"{what}[{pos}] is {value!r}, which is not one of the models")
                out[pos] = lookup[value]
            else:
                out[pos] = _one_index(value, len(names), f"{what}[{pos}]")
        arr = out
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{what} must hold model indices or names; got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = np.flatnonzero((arr < 0) | (arr >= len(names)))
    if bad.size:
        pos = int(bad[0])
        raise ValueError(f"{what}[{pos}] is {int(arr[pos])}, not a model index (0 to {len(names) - 1})")
    return arr


def _one_index(value, k: int, where: str) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < k:
        return int(value)
    raise ValueError(f"{where} is {value!r}, not a model index (0 to {k - 1}) or a model name")


def _outcome_codes(outcome) -> np.ndarray:
    arr = np.asarray(outcome)
    if arr.ndim != 1:
        raise ValueError(f"outcome must be one-dimensional; got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        codes = arr.astype(np.int64)
        bad = np.flatnonzero((codes < 0) | (codes >= len(OUTCOMES)))
        if bad.size:
            pos = int(bad[0])
            raise ValueError(f"outcome[{pos}] is {int(codes[pos])}; expected a code 0-3 for {', '.join(OUTCOMES)}")
        return codes
    words, inverse = np.unique(arr.astype(str), return_inverse=True)
    lookup = {word: code for code, word in enumerate(OUTCOMES)}
    for word in words.tolist():
        if word not in lookup:
            pos = int(np.flatnonzero(arr.astype(str) == word)[0])
            raise ValueError(f"outcome[{pos}] is {word!r}; expected one of {', '.join(OUTCOMES)}")
    return np.array([lookup[w] for w in words.tolist()], dtype=np.int64)[inverse.reshape(-1)]


def from_battles(models: Sequence[str], model_a, model_b, outcome) -> PairCounts:
    """Counts from one row per vote: ``model_a[i]`` shown first, ``model_b[i]`` second (indices into
    ``models`` or names), ``outcome[i]`` one of ``OUTCOMES`` (or its code 0-3)."""
    names = _model_names(models)
    a = _indices(model_a, names, "model_a")
    b = _indices(model_b, names, "model_b")
    codes = _outcome_codes(outcome)
    if not (a.shape[0] == b.shape[0] == codes.shape[0]):
        raise ValueError(
            f"model_a, model_b and outcome differ in length ({a.shape[0]}, {b.shape[0]}, {codes.shape[0]})"
        )
    same = np.flatnonzero(a == b)
    if same.size:
        pos = int(same[0])
        raise ValueError(f"battle {pos} compares {names[a[pos]]!r} with itself")
    # Put the lower index first; a vote for the side shown first then goes to whichever model that is.
    swap = a > b
    first, second = np.where(swap, b, a), np.where(swap, a, b)
    code = np.where(swap & (codes == 0), 1, np.where(swap & (codes == 1), 0, codes))
    k = len(names)
    table = np.bincount((first * k + second) * 4 + code, minlength=k * k * 4).reshape(k * k, 4)
    return _from_table(names, table)


def from_counts(models: Sequence[str], first, second, wins, losses, ties, both_bad=None) -> PairCounts:
    """Counts given per pair: ``wins[p]`` votes for ``first[p]``, ``losses[p]`` for ``second[p]``,
    ``ties[p]`` and ``both_bad[p]`` (default 0). Rows for the same pair (either order) are added."""
    names = _model_names(models)
    i = _indices(first, names, "first")
    j = _indices(second, names, "second")
    cols = {
        "wins": wins,
        "losses": losses,
        "ties": ties,
        "both_bad": np.zeros(i.shape[0]) if both_bad is None else both_bad,
    }
    arrays = {}
    for what, values in cols.items():
        arr = np.asarray(values)
        if arr.shape != i.shape or j.shape != i.shape:
            raise ValueError(f"first, second and {what} differ in shape ({i.shape}, {j.shape}, {arr.shape})")
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
                pos = int(np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)))[0])
                raise ValueError(
                    f"{what} of {_pair_name(names, i[pos], j[pos])} is {arr[pos].item()!r}; counts are whole numbers"
                )
        elif arr.dtype.kind not in "iu":
            raise ValueError(f"{what} must be whole-number counts; got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        negative = np.flatnonzero(arr < 0)
        if negative.size:
            pos = int(negative[0])
            raise ValueError(
                f"{what} of {_pair_name(names, i[pos], j[pos])} is {int(arr[pos])}; counts cannot be negative"
            )
        arrays[what] = arr
    same = np.flatnonzero(i == j)
    if same.size:
        raise ValueError(f"row {int(same[0])} pairs {names[i[same[0]]]!r} with itself")
    swap = i > j
    lo, hi = np.where(swap, j, i), np.where(swap, i, j)
    w = np.where(swap, arrays["losses"], arrays["wins"])
    lost = np.where(swap, arrays["wins"], arrays["losses"])
    k = len(names)
    table = np.zeros((k * k, 4), dtype=np.int64)
    key = lo * k + hi
    for col, values in enumerate((w, lost, arrays["ties"], arrays["both_bad"])):
        np.add.at(table[:, col], key, values)
    return _from_table(names, table)


def _pair_name(names: tuple[str, ...], i, j) -> str:
    return f"({names[int(i)]!r}, {names[int(j)]!r})"


def _from_table(names: tuple[str, ...], table: np.ndarray) -> PairCounts:
    k = len(names)
    keys = np.flatnonzero(table.sum(axis=1) > 0)
    counts = PairCounts(
        models=names,
        first=keys // k,
        second=keys % k,
        wins=table[keys, 0],
        losses=table[keys, 1],
        ties=table[keys, 2],
        both_bad=table[keys, 3],
    )
    battles = counts.per_model()["battles"]
    never = [names[m] for m in np.flatnonzero(battles == 0)]
    if never:
        listed = ", ".join(repr(n) for n in never)
        raise ValueError(f"model{'s' if len(never) > 1 else ''} {listed} never compared with another model")
    return counts
