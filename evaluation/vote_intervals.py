"""The interval a board rated from pairwise votes shows (``Protocol.board == "votes"``), as a request
or the command picks it: ``ci`` "sandwich" (default: the cluster-robust sandwich, votes clustered by
the protocol's ``cluster_key``) or "bootstrap" (the multinomial bootstrap of the battle counts, with
``rounds`` redraws, MIN_ROUNDS to MAX_ROUNDS, N_BOOT by default). Other boards' intervals are always
the bootstrap over items: ``ci`` there is refused, as is ``rounds`` without ``ci=bootstrap``.
Definitions: docs/statistics.md. The cache key of a board names the choice (board_cache).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocols import registry
from protocols.kit.bootstrap import N_BOOT
from protocols.kit.pairwise import METHODS

CI_PARAMETER = "ci"
ROUNDS_PARAMETER = "rounds"
MIN_ROUNDS = 100  # fewer rounds make a percentile interval's 2.5 % ends rest on a couple of rounds
MAX_ROUNDS = 5000  # about five times the bench's 1,000 rounds: bounds the time one request may take


class IntervalChoiceError(ValueError):
    """A ``ci`` / ``rounds`` the board cannot give; ``field`` names the parameter at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class IntervalChoice:
    method: str = "sandwich"
    rounds: int | None = None  # bootstrap only

    def signature(self) -> str:
        """The part of a cache key that tells the choices apart."""
        return self.method if self.rounds is None else f"{self.method}:{self.rounds}"

    def options(self) -> dict:
        """Keyword arguments of the protocol's ``vote_board``."""
        return {"ci": self.method} | ({"rounds": self.rounds} if self.rounds is not None else {})


DEFAULT = IntervalChoice()


def parse(protocol: str, ci: str | None, rounds: str | int | None) -> IntervalChoice:
    """The choice ``ci`` and ``rounds`` (text as a query string gives them, or None) name for a
    board of ``protocol``; IntervalChoiceError naming what was found and what was expected."""
    ci = (ci or "").strip() or None
    rounds_text = None if rounds is None else str(rounds).strip() or None
    votes = registry.get(protocol).board == "votes"
    if ci is not None and not votes:
        raise IntervalChoiceError(
            CI_PARAMETER,
            f"got {ci!r}, but only a board rated from pairwise votes offers a choice of interval; this "
            f"{protocol} board's intervals are the bootstrap over items",
        )
    if ci is not None and ci not in METHODS:
        raise IntervalChoiceError(CI_PARAMETER, f"expected one of {', '.join(METHODS)}; got {ci!r}")
    method = ci or DEFAULT.method
    if method != "bootstrap":
        if rounds_text is not None:
            raise IntervalChoiceError(
                ROUNDS_PARAMETER, f"got {rounds_text!r}, but rounds apply to ci=bootstrap only (ci is {method})"
            )
        return IntervalChoice(method)
    if rounds_text is None:
        return IntervalChoice(method, N_BOOT)
    try:
        n = int(rounds_text)
    except ValueError:
        n = None
    if n is None or not MIN_ROUNDS <= n <= MAX_ROUNDS:
        raise IntervalChoiceError(
            ROUNDS_PARAMETER, f"expected a whole number from {MIN_ROUNDS} to {MAX_ROUNDS}; got {rounds_text!r}"
        )
    return IntervalChoice(method, n)
