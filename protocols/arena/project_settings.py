"""The arena's own project settings and their checks (Protocol.settings_module, protocols/base.py):
the shared layer finds them through the registry (annotation/setting_rules.py) and never names
them. Plain Python.

- ``arena_excluded_raters``: the rater keys a researcher left out of the board (integrity.py,
  evaluation/rater_exclusion.py): a list of "user:<id>" / "ext:<name>", stored sorted.
- ``arena_min_view_seconds``: the least time an annotator must have had a task in front of them
  before a vote on it is taken (viewing.py); 0 turns the server's viewing checks off. Unset: the
  longer video's length where the import measured it, else ``DEFAULT_MIN_VIEW_SECONDS``.
"""

from __future__ import annotations

import math
from typing import Any

EXCLUDED_SETTING = "arena_excluded_raters"
MIN_VIEW_SETTING = "arena_min_view_seconds"
MAX_RATER_KEY = 200  # "user:<id>" or "ext:<the imported rater's name>"
MAX_EXCLUDED = 10_000
MAX_MIN_VIEW_SECONDS = 3600


def rater_key_valid(key: Any) -> bool:
    """Whether ``key`` has the shape of a rater key: "user:<id>" or "ext:<name>" (up to 200 characters)."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_RATER_KEY:
        return False
    kind, sep, rest = key.partition(":")
    if not sep or not rest:
        return False
    return (kind == "user" and rest.isascii() and rest.isdigit()) or kind == "ext"


def excluded_raters_clean(value: Any, errors: dict[str, str]) -> list[str] | None:
    """The ``arena_excluded_raters`` setting: a list of rater keys ("user:<id>", "ext:<name>"),
    without repeats, as stored (sorted); None with the reason in ``errors`` otherwise."""
    if not isinstance(value, list) or len(value) > MAX_EXCLUDED:
        errors[EXCLUDED_SETTING] = f'A list of rater keys (up to {MAX_EXCLUDED}), e.g. ["user:12", "ext:r7"].'
        return None
    bad = [k for k in value if not rater_key_valid(k)]
    if bad:
        errors[EXCLUDED_SETTING] = (
            f"{', '.join(repr(k) for k in bad[:5])}: not a rater key; expected user:<id> or ext:<name>."
        )
        return None
    return sorted(set(value))


def min_view_seconds_clean(value: Any, errors: dict[str, str]) -> float | None:
    """The ``arena_min_view_seconds`` setting: seconds from 0 to 3600 (0: no viewing checks)."""
    seconds = None
    if not isinstance(value, bool):
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = None
    if seconds is None or not math.isfinite(seconds) or not 0 <= seconds <= MAX_MIN_VIEW_SECONDS:
        errors[MIN_VIEW_SETTING] = (
            f"Seconds from 0 to {MAX_MIN_VIEW_SECONDS} (0: votes need no viewing time); got {value!r}. "
            "Leave it out for the longer video's length."
        )
        return None
    return int(seconds) if seconds.is_integer() else seconds


SETTING_CHECKS = {EXCLUDED_SETTING: excluded_raters_clean, MIN_VIEW_SETTING: min_view_seconds_clean}
