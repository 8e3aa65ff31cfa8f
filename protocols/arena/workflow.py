"""The arena's annotation form: two outputs of one prompt side by side, a vote between them.

A protocol that brings its own form names this module as ``Protocol.workflow_module``
(protocols/base.py, "A workflow of its own"); the apps call it through annotation/protocols.py
``custom_workflow`` and never name the arena. Plain Python, no Django.

Sides: which output is shown on the left is drawn per assignment, from (the project's option seed,
the item, the annotator) (``shown_order``), so an annotator sees the same order every time they
open the item and two annotators see independent orders. The annotator receives the two outputs
as ``left`` and ``right`` with ``shown`` ("ab" or "ba": which stored output each side is) and
never the payload's ``model_a`` / ``model_b``, its media field names or anything else that ties a
side to a model.

The form submits its votes in screen terms, ``{"shown": "ba", "votes": {"overall": "left",
"state_change": "tie"}, "played": {"left": 4.0, "right": 4.0}}`` (``played``: the seconds of each
video the form played, which the server checks against its own clock and does not store:
viewing.py); ``validate`` stores them in the item's terms, ``{"winner": "b",
"criteria": {"state_change": "tie"}, "shown": "ba"}``, the shape an imported vote has too (without
``shown``: ``{"winner": "a"}``). Every stored answer is therefore about ``a`` and ``b``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from protocols.base import seeded_rng
from protocols.fields import FieldError

from .fields import CRITERION_LABELS, HEADLINE_CRITERION, VOTE_CRITERIA, WINNERS, media_kind
from .viewing import check as _viewing_check
from .viewing import played_errors

LABEL = "Pairwise comparison"
# The page's template and ES module live in this package (templates/arena/, static/arena/), found
# by the shared layer's loader and finder over every protocol's folders (config/protocol_assets.py).
TEMPLATE = "arena/work.html"
SCRIPT = "arena/arena.js"
# The field naming who voted, in an imported vote line.
IMPORT_RATER_FIELD = "rater"
# A vote in screen terms: the output on the left won, the one on the right, a tie, both bad.
SCREEN_VOTES = ("left", "right", "tie", "both_bad")
ORDERS = ("ab", "ba")
MAX_RATER = 200


@dataclass(frozen=True)
class Context:
    """What a vote on an item of the project may be about: the protocol's criteria, headline first."""

    criteria: tuple[str, ...] = VOTE_CRITERIA
    # The order this annotator was shown (an annotator's own answer); None: a reviewer's edit or an
    # import, which are in the item's terms.
    shown: str | None = None


def context(protocol: Any, payload: Mapping[str, Any], *, assignment: Mapping[str, Any] | None = None) -> Context:
    shown = None
    if assignment is not None:
        shown = shown_order(assignment["seed"], assignment["item_id"], assignment["annotator"])
    return Context(criteria=tuple(protocol.criteria), shown=shown)


def shown_order(seed: int, item_id: str, annotator: str | None) -> str:
    """ "ab" (a on the left) or "ba": the seeded draw of one assignment (see the module)."""
    return ORDERS[seeded_rng(seed, str(item_id), f"sides:{annotator or ''}").random() < 0.5]


# What a reviewer reads a stored vote as, per value ({model_a} / {model_b}: the item's fields,
# filled in by the review page; a reviewer may see the models, an annotator never does).
REVIEW_CHOICES = (
    ("a", "A better ({model_a})"),
    ("b", "B better ({model_b})"),
    ("tie", "Tie"),
    ("both_bad", "Both bad"),
)
SHOWN_LABELS = {"ab": "A left, B right", "ba": "B left, A right"}


def _criteria(protocol: Any) -> list[dict[str, Any]]:
    return [
        {"key": c, "label": CRITERION_LABELS.get(c, c), "required": c == HEADLINE_CRITERION} for c in protocol.criteria
    ]


def form(protocol: Any) -> dict[str, Any]:
    """The project-wide facts of the annotate page's form, which the shared layer adds to its
    description (annotation/selectors.py ``workflow_form``); what an annotator needs and nothing
    else (no media field of the item's, no model field):

    - ``criteria``, ``votes``: what a vote may be about (headline first) and its screen words;
    - ``media``: the annotator's item's media fields, ``left`` and ``right`` (what annotator_view
      gives in place of the payload's), so the workbench preloads the next task's two outputs.
    """
    return {
        "criteria": _criteria(protocol),
        "votes": list(SCREEN_VOTES),
        "media": [{"field": side, "kind": "output", "label": side.capitalize()} for side in ("left", "right")],
    }


def review_form(protocol: Any) -> dict[str, Any]:
    """What the review page adds to the form (``workflow_form(review=True)``; never sent to an
    annotator): ``review``, how it shows and edits an answer (static/js/review_choices.js), in the
    item's terms with the models named: the payload's media fields, the item's text fields, one
    choice field per criterion (``path`` into the stored answer) and the sides shown."""
    criteria = _criteria(protocol)
    choices = [{"value": v, "label": text} for v, text in REVIEW_CHOICES]
    return {
        "review": {
            "media": [
                {"field": f"{kind}_{side}", "kind": kind, "label": f"{side.upper()} · {{model_{side}}}"}
                for kind in ("video", "image")
                for side in ("a", "b")
            ],
            "text": [
                {"field": "prompt", "label": "Prompt"},
                {"field": "model_a", "label": "Model A"},
                {"field": "model_b", "label": "Model B"},
            ],
            "fields": [
                {
                    "key": c["key"],
                    "label": c["label"],
                    "path": ["winner"] if c["required"] else ["criteria", c["key"]],
                    "required": c["required"],
                    "choices": choices,
                }
                for c in criteria
            ],
            "notes": [{"key": "shown", "label": "Sides shown", "path": ["shown"], "values": SHOWN_LABELS}],
        },
    }


def annotator_view(
    payload: Mapping[str, Any], media: Mapping[str, Any], *, seed: int, item_id: str, annotator: str | None
) -> dict[str, Any]:
    """The annotator's item besides the shown fields: the two outputs (``media``: the payload's
    media fields as served) as ``left`` / ``right`` in the assignment's order, their kind and
    ``shown``. The media fields themselves, named by side, never reach the annotator."""
    kind = media_kind(dict(payload)) or "video"
    order = shown_order(seed, item_id, annotator)
    return {
        "kind": kind,
        "left": media.get(f"{kind}_{order[0]}"),
        "right": media.get(f"{kind}_{order[1]}"),
        "shown": order,
    }


def _to_item_terms(vote: Any, order: str) -> str | None:
    if vote == "left":
        return order[0]
    if vote == "right":
        return order[1]
    return vote if vote in ("tie", "both_bad") else None


def validate(result: Any, ctx: Context) -> tuple[dict[str, Any], dict[str, str]]:
    """(the stored answer, errors by field) of a submitted vote: the form's screen-terms shape or
    an answer in the item's terms (an import, a reviewer's edit); see the module."""
    if not isinstance(result, dict):
        return {}, {"result": "The result must be a JSON object."}
    if "votes" in result:
        return _validate_screen(result, ctx)
    if ctx.shown is not None:
        # An annotator's own vote: the annotator saw left and right, never which output is a, so a
        # vote about a and b could only be a guess (or a replay of another rater's answer).
        return {}, {
            "votes": 'Vote on what you were shown: {"shown": "ab" or "ba", "votes": {criterion: left, right, '
            "tie or both_bad}}; a vote about a and b is for imports and reviewers."
        }
    return _validate_item_terms(result, ctx)


def _validate_screen(result: dict[str, Any], ctx: Context) -> tuple[dict[str, Any], dict[str, str]]:
    errors: dict[str, str] = {}
    for key in sorted(set(result) - {"votes", "shown", "played"}):
        errors[key] = "Unknown field."
    if "played" in result:  # what the form played of each side: checked by viewing_check, not stored
        errors.update(played_errors(result["played"]))
    order = result.get("shown")
    if order not in ORDERS:
        errors["shown"] = f"Give the order the outputs were shown in: one of {', '.join(ORDERS)}; got {order!r}."
        order = None
    elif ctx.shown is not None and order != ctx.shown:
        # The server drew the sides; a form that says otherwise (stale or altered) would store
        # every vote the wrong way round.
        errors["shown"] = f"The outputs were shown to you as {ctx.shown!r}, not {order!r}; reload the task."
        order = None
    votes = result.get("votes")
    if not isinstance(votes, dict):
        errors["votes"] = "Give the votes as an object criterion -> left, right, tie or both_bad."
        votes = {}
    clean_votes: dict[str, str] = {}
    for key, vote in votes.items():
        if key not in ctx.criteria:
            errors[f"votes.{key}"] = f"Not a criterion of this project; the criteria are {', '.join(ctx.criteria)}."
        elif vote not in SCREEN_VOTES:
            errors[f"votes.{key}"] = f"Vote one of {', '.join(SCREEN_VOTES)}; got {vote!r}."
        elif order is not None:
            clean_votes[key] = _to_item_terms(vote, order)
    headline = ctx.criteria[0]
    if headline not in votes and "votes" not in errors:
        errors[f"votes.{headline}"] = "Vote on the outputs as a whole: left, right, tie or both bad."
    if errors:
        return {}, errors
    return _stored(clean_votes, ctx, order), {}


def _validate_item_terms(result: dict[str, Any], ctx: Context) -> tuple[dict[str, Any], dict[str, str]]:
    errors: dict[str, str] = {}
    for key in sorted(set(result) - {"winner", "criteria", "shown"}):
        errors[key] = "Unknown field."
    headline = ctx.criteria[0]
    votes: dict[str, str] = {}
    winner = result.get("winner")
    if winner not in WINNERS:
        errors["winner"] = f"Give the winner as one of {', '.join(WINNERS)}; got {winner!r}."
    else:
        votes[headline] = winner
    criteria = result.get("criteria", {})
    if not isinstance(criteria, dict):
        errors["criteria"] = "Give per-criterion votes as an object criterion -> a, b, tie or both_bad."
        criteria = {}
    for key, vote in criteria.items():
        if key not in ctx.criteria[1:]:
            errors[f"criteria.{key}"] = (
                f"Not a criterion with a vote of its own; those are {', '.join(ctx.criteria[1:]) or 'none'}."
            )
        elif vote not in WINNERS:
            errors[f"criteria.{key}"] = f"Vote one of {', '.join(WINNERS)}; got {vote!r}."
        else:
            votes[key] = vote
    order = result.get("shown")
    if "shown" in result and order not in ORDERS:
        errors["shown"] = f"The order shown is one of {', '.join(ORDERS)}; got {order!r}."
    if errors:
        return {}, errors
    return _stored(votes, ctx, order), {}


def _stored(votes: Mapping[str, str], ctx: Context, order: str | None) -> dict[str, Any]:
    """The one stored shape: the headline vote as ``winner``, the other criteria voted on (in the
    form's order) under ``criteria``, the shown order where a form recorded it."""
    headline = ctx.criteria[0]
    out: dict[str, Any] = {"winner": votes[headline]}
    others = {c: votes[c] for c in ctx.criteria[1:] if c in votes}
    if others:
        out["criteria"] = others
    if order is not None:
        out["shown"] = order
    return out


def check_line(obj: Mapping[str, Any], ctx: Context) -> tuple[str, str, dict[str, Any]] | list[FieldError]:
    """One imported vote line ``{"item", "rater", "winner", "criteria"?}`` (the lines formats.py's
    vote reader gives): (item, rater, stored answer) or the errors naming each field."""
    errors: list[FieldError] = []
    item, rater = obj.get("item"), obj.get("rater")
    if not isinstance(item, str) or not item:
        errors.append(FieldError("item", "required, the item id (a string)"))
    if not isinstance(rater, str) or not rater.strip() or len(rater) > MAX_RATER:
        errors.append(FieldError("rater", f"required, a rater id string of at most {MAX_RATER} characters"))
    answer = {k: v for k, v in obj.items() if k not in ("item", "rater")}
    clean, problems = _validate_item_terms(answer, ctx)
    if "shown" in answer:
        problems = {**problems, "shown": "not in an imported vote (only the platform's form records the sides shown)"}
    errors.extend(FieldError(name, reason) for name, reason in problems.items())
    if errors:
        return errors
    return item, rater, clean


def compared(result: Mapping[str, Any], ctx: Context) -> dict[str, Hashable | None]:
    """The votes annotators are compared on, per criterion (None where one did not vote on it):
    nominal values for agreement (Krippendorff's α), disagreement marks and auto-verification."""
    others = result.get("criteria") or {}
    return {c: (result.get("winner") if i == 0 else others.get(c)) for i, c in enumerate(ctx.criteria)}


def summary(result: Mapping[str, Any]) -> str:
    """One line of an answer for lists (one's own work): in screen terms where the form recorded
    the sides shown ("left better"), else in the item's ("A better")."""
    words = {"a": "A better", "b": "B better", "tie": "tie", "both_bad": "both bad"}
    order = result.get("shown")
    if order in ORDERS:
        words.update({order[0]: "left better", order[1]: "right better"})
    text = words.get(str(result.get("winner")), "?")
    for criterion, vote in (result.get("criteria") or {}).items():
        text += f"; {CRITERION_LABELS.get(criterion, criterion)}: {words.get(str(vote), '?')}"
    return text


def viewing_check(
    result: Any,
    ctx: Context,
    *,
    payload: Mapping[str, Any],
    media: Mapping[str, Any],
    settings: Mapping[str, Any],
    seconds: float,
) -> dict[str, str]:
    """Errors by field of an annotator's vote that came too soon or without both outputs played
    (viewing.py): ``seconds`` the server's time since the task was shown, ``media`` the payload's
    media fields as served, ``settings`` the protocol's project settings as read."""
    return _viewing_check(result, payload=payload, media=media, settings=settings, seconds=seconds, shown=ctx.shown)


def gold_correct(payload: Mapping[str, Any], result: Mapping[str, Any]) -> bool | None:
    """A vote on a gold pair against its known better side (``gold_winner``); None on other items."""
    known = payload.get("gold_winner")
    return None if known is None else result.get("winner") == known
