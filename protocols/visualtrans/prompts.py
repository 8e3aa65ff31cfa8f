"""VisualTrans: a question about a transformation shown by an initial and a final image (and
sometimes candidate images), answered as a letter (choice), a whole number (count) or a list
(set)."""

from __future__ import annotations

from typing import Any

from protocols.base import LETTERS
from protocols.kit.prompting import (
    ItemInput,
    Media,
    MediaError,
    PreparedQuery,
    failed,
    image,
    lettered,
    query_for,
    render_prompt,
    text,
    user,
)

PROMPT_VERSION = "visualtrans-v1"

_INTRO = "The first image shows a scene before a transformation and the second image shows it afterwards."
_REPLY = {
    "choice": "Answer with the letter of the correct option ({letters}) and nothing else.",
    "count": "Answer with a single whole number and nothing else.",
    "set": "List every correct answer, separated by commas, and nothing else.",
}
_MAX_TOKENS = {"choice": 4, "count": 8, "set": 64}


def _image_label(index: int) -> str:
    if index == 0:
        return "Image 1 (initial state):"
    if index == 1:
        return "Image 2 (final state):"
    return f"Image {index + 1} (candidate):"


def suggestion_queries(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The queries of an item that has no answer yet (suggest mode): its question, unanswered."""
    return {"qa": {"options": list(payload.get("options") or []), "answer": None, "format": payload.get("format")}}


def build(item: ItemInput, *, media: Media, params: dict[str, Any]) -> list[PreparedQuery]:
    p = item.payload
    resolved = item.resolved["qa"]
    options = resolved["options"]
    fmt = p.get("format") or ("choice" if options else "count")
    paths = item.media_paths.get("images") or []
    parts: list[dict[str, Any]] = []
    try:
        if not paths:
            raise MediaError("the item has no images")
        for i, path in enumerate(paths):
            parts += [text(_image_label(i)), image(media.image(path))]
    except MediaError as exc:
        return [failed("qa", options, str(exc))]
    ask = f"{_INTRO}\nQuestion: {p['question']}"
    choices = None
    if fmt == "choice":
        letters = list(LETTERS[: len(options)])
        ask += "\n" + lettered(options) + "\n" + _REPLY["choice"].format(letters=", ".join(letters))
        choices = letters
    else:
        ask += "\n" + _REPLY[fmt]
    messages = user(parts + [text(ask)])
    return [
        PreparedQuery(
            key="qa",
            query=query_for("qa", item, messages, choices=choices, max_tokens=_MAX_TOKENS[fmt]),
            options=options,
            prompt=render_prompt(messages),
            fmt=fmt,
        )
    ]
