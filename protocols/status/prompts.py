"""STATUS Bench: six queries per image-pair quintuplet (state identification, image retrieval,
state-change identification with 2 and 4 options). Prompts are StateLab's own wording.

Also the suggestion prompt: a model drafts a whole quintuplet (states, change, distractors,
category, difference) that pre-fills the annotators' form.
"""

from __future__ import annotations

import json
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

PROMPT_VERSION = "status-v1"

_OSI = (
    "Look closely at the object in this photo. Which description matches the state it is in right now?\n"
    "{options}\n"
    "Answer with the letter of the matching description (A or B) and nothing else."
)
_IR = (
    "Here are two photos, labelled A and B, of the same object. Which photo shows {state}?\n"
    "Answer with the letter of the photo (A or B) and nothing else."
)
_SCI = (
    "The first photo was taken before and the second photo after something was done to an object. "
    "Which action turns the scene in the first photo into the scene in the second?\n"
    "{options}\n"
    "Answer with the letter of the action ({letters}) and nothing else."
)


def build(item: ItemInput, *, media: Media, params: dict[str, Any]) -> list[PreparedQuery]:
    p = item.payload
    out: list[PreparedQuery] = []
    try:
        img_a = media.image(item.media_paths.get("image_a"))
        img_b = media.image(item.media_paths.get("image_b"))
    except MediaError as exc:
        return [failed(key, q["options"], str(exc)) for key, q in item.resolved.items()]
    for key, resolved in item.resolved.items():
        options = resolved["options"]
        if key in ("osi_a", "osi_b"):
            shown = img_a if key == "osi_a" else img_b
            messages = user([image(shown), text(_OSI.format(options=lettered(options)))])
            choices = ["A", "B"]
        elif key in ("ir_a", "ir_b"):
            state = p["state_a"] if key == "ir_a" else p["state_b"]
            messages = user(
                [text("Photo A:"), image(img_a), text("Photo B:"), image(img_b), text(_IR.format(state=state))]
            )
            choices = ["A", "B"]
        else:  # sci2 / sci4
            letters = list(LETTERS[: len(options)])
            messages = user(
                [
                    text("First photo (before):"),
                    image(img_a),
                    text("Second photo (after):"),
                    image(img_b),
                    text(_SCI.format(options=lettered(options), letters=", ".join(letters))),
                ]
            )
            choices = letters
        out.append(
            PreparedQuery(
                key=key,
                query=query_for(key, item, messages, choices=choices, max_tokens=4),
                options=options,
                prompt=render_prompt(messages),
            )
        )
    return out


# --- suggestions: a model drafts a quintuplet for the labeling form ---------------------------

SUGGEST_KEY = "suggest"
SUGGEST_JSON_QUERIES = (SUGGEST_KEY,)  # asked under a JSON schema (inference.prompting.json_queries)


def suggestion_queries(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The queries of an item that has no answer yet (suggest mode): one draft of the quintuplet."""
    return {SUGGEST_KEY: {"options": [], "answer": None}}


SUGGEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "state_a": {"type": "string"},
        "state_b": {"type": "string"},
        "change": {"type": "string"},
        "change_distractors": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3},
        "category": {"type": "string", "enum": ["positional", "functional", "other"]},
        "difference": {"type": "string", "enum": ["slight", "significant"]},
    },
    "required": ["state_a", "state_b", "change", "change_distractors", "category", "difference"],
    "additionalProperties": False,
}
_SUGGEST = (
    "The two photos show the same object before (first) and after (second) its state changed. "
    "Fill in a JSON object with: state_a and state_b, each a short noun phrase naming the object and its "
    'state in that photo (for example "a half-open drawer"); change, a short verb phrase for what was done '
    '(for example "pull the drawer out"); change_distractors, three plausible but wrong verb phrases; '
    "category, one of positional, functional or other; difference, slight or significant. "
    "Reply with the JSON object only."
)


def build_suggestion(item: ItemInput, *, media: Media, params: dict[str, Any]) -> list[PreparedQuery]:
    try:
        img_a = media.image(item.media_paths.get("image_a"))
        img_b = media.image(item.media_paths.get("image_b"))
    except MediaError as exc:
        return [failed(SUGGEST_KEY, [], str(exc))]
    messages = user([text("First photo:"), image(img_a), text("Second photo:"), image(img_b), text(_SUGGEST)])
    return [
        PreparedQuery(
            key=SUGGEST_KEY,
            query=query_for(SUGGEST_KEY, item, messages, json_schema=SUGGEST_SCHEMA, max_tokens=300),
            options=[],
            prompt=render_prompt(messages),
        )
    ]


def parse_suggestion(raw: str) -> dict[str, Any] | None:
    """The drafted quintuplet, or None unless every field is present and well formed."""
    try:
        start, end = raw.index("{"), raw.rindex("}")
        data = json.loads(raw[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    fields = ("state_a", "state_b", "change")
    if not all(isinstance(data.get(f), str) and data[f].strip() for f in fields):
        return None
    distractors = data.get("change_distractors")
    if not (
        isinstance(distractors, list)
        and len(distractors) == 3
        and all(isinstance(d, str) and d.strip() for d in distractors)
    ):
        return None
    if data.get("category") not in ("positional", "functional", "other") or data.get("difference") not in (
        "slight",
        "significant",
    ):
        return None
    return {
        "state_a": data["state_a"].strip(),
        "state_b": data["state_b"].strip(),
        "change": data["change"].strip(),
        "change_distractors": [d.strip() for d in distractors],
        "category": data["category"],
        "difference": data["difference"],
    }
