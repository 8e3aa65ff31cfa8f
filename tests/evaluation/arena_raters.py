"""An arena project whose raters the screen tells apart: five honest imported raters and one
member who votes for the weaker model every time (tests of evaluation/rater_exclusion.py)."""

from __future__ import annotations

from annotation.models import Annotation, ItemStatus
from tests.protocols.arena.helpers import MODEL_NAMES, make_pair

STRONG, WEAK = MODEL_NAMES[:2]
N_ITEMS = 24
HONEST = tuple(f"h{r}" for r in range(5))


def honest_vote(rater: int, n: int, strong_side: str, weak_side: str) -> str:
    """Each honest rater misses on two items of their own (so the fit stays finite), else picks strong."""
    return weak_side if n in (2 * rater, 2 * rater + 1) else strong_side


def seed_votes(project, media, contrarian) -> list:
    """24 items of STRONG against WEAK (sides alternating), annotated: the honest raters' votes and
    the contrarian member's (always the weak side). Returns the items."""
    items = []
    for n in range(N_ITEMS):
        models = (STRONG, WEAK) if n % 2 == 0 else (WEAK, STRONG)
        strong_side, weak_side = ("a", "b") if n % 2 == 0 else ("b", "a")
        item = make_pair(project, f"p{n}", media, models=models)
        for r, name in enumerate(HONEST):
            Annotation.objects.create(
                item=item,
                external_rater=name,
                result={"winner": honest_vote(r, n, strong_side, weak_side)},
                source="import",
            )
        Annotation.objects.create(item=item, annotator=contrarian, result={"winner": weak_side}, source="import")
        item.status = ItemStatus.ANNOTATED
        item.save(update_fields=["status"])
        items.append(item)
    return items


def strong_wins(*, with_contrarian: bool) -> tuple[int, int]:
    """(STRONG's wins, battles) counted from the votes seeded above."""
    honest_misses = 2 * len(HONEST)
    battles = N_ITEMS * (len(HONEST) + (1 if with_contrarian else 0))
    return N_ITEMS * len(HONEST) - honest_misses, battles
