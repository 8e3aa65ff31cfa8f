"""The server's own check that a vote came after the annotator saw both outputs. Plain Python.

The browser locks the vote buttons until both videos played through (static/arena/arena.js), but a
vote is taken from anything that can post to the API; so the server checks it too, with its own
clock. ``seconds`` is the time the annotator had the task as the server measured it (from the later
of their claim and their previous submit to this vote: annotation/queue/submit.py, the active
time stored with the vote), which no client can stretch:

- the vote must come at least the project's minimum viewing time after the task was shown
  (``arena_min_view_seconds``; unset: the longer video's length where the import measured both,
  else ``DEFAULT_MIN_VIEW_SECONDS``; 0: no viewing checks at all);
- for two videos, the form reports how many seconds of each it played (``played``: ``{"left": s,
  "right": s}``, the screen's sides, as the votes are), and the vote is refused unless each side
  played (through, within a frame or two, where its length is known) and neither claims more play
  than the time that passed on the server (plus ``SLACK_SECONDS`` for the request's own time).

The workflow module calls ``check`` as its ``viewing_check`` hook; a refusal names the time seen
and the time required, and nothing is stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .fields import media_kind
from .project_settings import MIN_VIEW_SETTING

DEFAULT_MIN_VIEW_SECONDS = 3.0  # images, and videos whose length the import could not read
SLACK_SECONDS = 1.0  # a reported play may exceed the server's time by this much (the request's own time)
SCREEN_SIDES = ("left", "right")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def played_errors(played: Any) -> dict[str, str]:
    """What is wrong with the shape of a reported ``played`` (none: seconds per screen side)."""
    if not isinstance(played, dict):
        return {"played": f"Report the seconds each video played as {{left: s, right: s}}; got {played!r}."}
    errors = {f"played.{k}": "Not a side; the sides are left and right." for k in played if k not in SCREEN_SIDES}
    for side in SCREEN_SIDES:
        if side in played and _number(played[side]) is None:
            errors[f"played.{side}"] = f"Seconds of play (a number, 0 or more); got {played[side]!r}."
    return errors


def _tolerance(asset: Mapping[str, Any]) -> float:
    """How much less than a video's length may count as played through (the form's own tolerance:
    two frames, between 0.1 and 0.5 s), at each end."""
    fps = _number(asset.get("fps")) or 25.0
    return min(0.5, max(0.1, 2.0 / fps))


def required_seconds(
    payload: Mapping[str, Any], media: Mapping[str, Any], settings: Mapping[str, Any]
) -> tuple[float, str]:
    """(the least viewing time of a vote on the item, what it is): see the module."""
    chosen = settings.get(MIN_VIEW_SETTING)
    if chosen is not None:
        return float(chosen), "this project's minimum viewing time"
    if media_kind(dict(payload)) == "video":
        lengths = [_number((media.get(f"video_{side}") or {}).get("duration")) for side in ("a", "b")]
        if all(lengths):
            return max(lengths), "the longer video's length"
    return DEFAULT_MIN_VIEW_SECONDS, "the default minimum viewing time"


def check(
    result: Any,
    *,
    payload: Mapping[str, Any],
    media: Mapping[str, Any],
    settings: Mapping[str, Any],
    seconds: float,
    shown: str | None,
) -> dict[str, str]:
    """Errors by field of a vote submitted ``seconds`` after the task was shown (none: it stands).
    ``media``: the payload's media fields as served ({"duration", "fps", ...} of a video, None where
    the asset is missing); ``settings``: the protocol's project settings as read; ``shown``: the
    order the server drew for this annotator ("ab" / "ba")."""
    required, why = required_seconds(payload, media, settings)
    if required <= 0:
        return {}
    errors: dict[str, str] = {}
    if seconds < required:
        errors["viewing"] = (
            f"This vote came {seconds:.1f} s after the task was shown to you; a vote needs at least "
            f"{required:.1f} s ({why}). Look at both outputs, then vote again."
        )
    if media_kind(dict(payload)) != "video":
        return errors
    played = result.get("played") if isinstance(result, dict) else None
    if played is None:
        errors["played"] = "Report the seconds each video played ({left: s, right: s}); a vote needs both watched."
        return errors
    shape = played_errors(played)
    if shape:
        return {**errors, **shape}
    order = shown if shown in ("ab", "ba") else "ab"
    for side, stored in zip(SCREEN_SIDES, order, strict=True):
        asset = media.get(f"video_{stored}") or {}
        value = float(played.get(side, 0))
        length = _number(asset.get("duration"))
        need = max(0.0, length - 2 * _tolerance(asset)) if length else 0.0
        if value > seconds + SLACK_SECONDS:
            errors[f"played.{side}"] = (
                f"The {side} video is reported as played for {value:.1f} s, but only {seconds:.1f} s passed "
                "since the task was shown to you."
            )
        elif value <= 0 or value < need:
            whole = f" of its {length:.1f} s" if length else ""
            errors[f"played.{side}"] = (
                f"The {side} video played {value:.1f} s{whole}; play both videos through before voting "
                f"(at least {need:.1f} s)."
                if length
                else f"The {side} video has not played; play both videos before voting."
            )
    return errors
