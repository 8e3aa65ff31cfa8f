"""ChangeIt-Frames: name the state of an object among 10 candidate labels, on the full image and
on the annotated box (crop), with the standard and the distractor candidate lists.

The model answers with the candidate's number (docs/protocols/changeit.md), "1" to "10". Tokenizers split "10"
into "1" + "0", so a first-token log-prob cannot tell "1" from "10": the backends store no
log-probs for these queries (inference.backends.base.single_token_choices)."""

from __future__ import annotations

from typing import Any

from protocols.kit.prompting import (
    ItemInput,
    Media,
    MediaError,
    PreparedQuery,
    failed,
    image,
    numbered,
    query_for,
    render_prompt,
    text,
    user,
)

PROMPT_VERSION = "changeit-v1"

_ASK = (
    "This photo shows {article} {object}. Which of these labels describes the state the {object} is in?\n"
    "{options}\n"
    "Answer with the number of the best label (1 to {n}) and nothing else."
)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def build(item: ItemInput, *, media: Media, params: dict[str, Any]) -> list[PreparedQuery]:
    p = item.payload
    obj = p["object"]
    bbox = p.get("bbox")
    out: list[PreparedQuery] = []
    for key, resolved in item.resolved.items():
        options = resolved["options"]
        condition = key.rsplit(":", 1)[1]
        if condition == "crop" and not isinstance(bbox, list):
            # No box, or the annotators' answer "nothing_to_label" / "cannot_determine" in its place.
            why = (
                f"the item has no box to crop ({bbox})"
                if isinstance(bbox, str)
                else "the item has no annotated box to crop"
            )
            out.append(failed(key, options, why))
            continue
        try:
            url = media.image(item.media_paths.get("image"), bbox=bbox if condition == "crop" else None)
        except MediaError as exc:
            out.append(failed(key, options, str(exc)))
            continue
        messages = user(
            [
                image(url),
                text(_ASK.format(article=_article(obj), object=obj, options=numbered(options), n=len(options))),
            ]
        )
        choices = [str(i + 1) for i in range(len(options))]
        out.append(
            PreparedQuery(
                key=key,
                query=query_for(key, item, messages, choices=choices, max_tokens=4),
                options=options,
                prompt=render_prompt(messages),
            )
        )
    return out
