"""M3-Verse: spot the difference between two videos of the same scene. Frames of both videos,
labelled before/after; the prompt says whether exactly one option is correct or one or more may
be, as the item's `multiple` field (or the project's setting) says — never from the answer."""

from __future__ import annotations

from typing import Any

from protocols.base import LETTERS
from protocols.kit.prompting import (
    ItemInput,
    Media,
    MediaError,
    PreparedQuery,
    failed,
    frames_param,
    image,
    letter_subsets,
    lettered,
    query_for,
    render_prompt,
    text,
    user,
)
from protocols.m3verse import takes_several

PROMPT_VERSION = "m3verse-v1"
DEFAULT_FRAMES = 32

_INTRO = (
    "You are shown frames from two videos of the same place, recorded before and after some things in it "
    "changed. Compare them to answer the question."
)
_ONE = "Exactly one option is correct. Answer with its letter and nothing else."
_ANY = (
    "One or more options may be correct. Answer with the letters of all correct options, separated by commas (for "
    "example A,C), and nothing else."
)


def video_parts(item: ItemInput, media: Media, n: int) -> tuple[list[dict[str, Any]], dict[str, list[int]]]:
    parts: list[dict[str, Any]] = []
    indices: dict[str, list[int]] = {}
    for field, label in (("video_before", "before"), ("video_after", "after")):
        urls, idx = media.frames(
            item.media_paths.get(field), n, content_hash=item.media_hashes.get(field), known=item.media_info.get(field)
        )
        indices[field] = idx
        parts.append(text(f"Video {label.upper()} the change, {len(urls)} frames in order:"))
        parts += [image(u) for u in urls]
    return parts, indices


def reply_rule(item: ItemInput) -> tuple[str, int]:
    """What the prompt says about the number of correct options, and the smallest answer size.

    From the item's `multiple` field or the project's setting (docs/protocols/m3verse.md), never from its
    answer: one correct option, or one or more that may be correct.
    """
    return (_ANY, 1) if takes_several(item.payload, item.project_settings) else (_ONE, 1)


def suggestion_queries(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The queries of an item that has no answer yet (suggest mode): its question, unanswered."""
    return {"qa": {"options": list(payload.get("options") or []), "answer": None}}


def build(item: ItemInput, *, media: Media, params: dict[str, Any]) -> list[PreparedQuery]:
    p = item.payload
    resolved = item.resolved["qa"]
    options = resolved["options"]
    n = frames_param(params, DEFAULT_FRAMES)
    try:
        parts, indices = video_parts(item, media, n)
    except MediaError as exc:
        return [failed("qa", options, str(exc))]
    rule, min_size = reply_rule(item)
    ask = f"{_INTRO}\nQuestion: {p['question']}\n{lettered(options)}\n{rule}"
    messages = user(parts + [text(ask)])
    choices = list(LETTERS[: len(options)]) if rule == _ONE else letter_subsets(len(options), min_size=min_size)
    return [
        PreparedQuery(
            key="qa",
            query=query_for("qa", item, messages, choices=choices, max_tokens=16),
            options=options,
            prompt=render_prompt(messages),
            frame_indices=indices,
        )
    ]
