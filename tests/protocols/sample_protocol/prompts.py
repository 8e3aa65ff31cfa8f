"""Lid check prompts: the image, the question, yes and no as lettered options."""

from __future__ import annotations

from typing import Any

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

PROMPT_VERSION = "lidcheck-v1"


def build(item: ItemInput, *, media: Media, params: dict[str, Any]) -> list[PreparedQuery]:
    options = item.resolved["qa"]["options"]
    try:
        picture = image(media.image(item.media_paths.get("image")))
    except MediaError as exc:
        return [failed("qa", options, str(exc))]
    messages = user(
        [
            picture,
            text(
                f"Question: {item.payload['question']}\n{lettered(options)}\n"
                "Answer with the letter of the correct option (A or B) and nothing else."
            ),
        ]
    )
    return [
        PreparedQuery(
            key="qa",
            query=query_for("qa", item, messages, choices=["A", "B"], max_tokens=4),
            options=options,
            prompt=render_prompt(messages),
            fmt="choice",
        )
    ]
