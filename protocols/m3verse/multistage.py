"""Multi-stage strategy for video QA (M3-Verse): caption short clips of each video, summarize the
captions of each video, then answer the question from the two summaries as text.

Same items, same query key ("qa"), same parsing and scoring as the direct strategy; only the way
the model sees the videos changes. Each stage is one batched backend call over the whole chunk.
A failure in any stage fails that item's query with the stage named in the error. Token usage
and attempts of all stages are added to the final reply; the prompt of the final query is the
text-only prompt, which contains both summaries.

Plain Python like every prompt module: `run` returns (item pk, prepared query, reply) per item
and the chunk that called it turns them into predictions; `backend` is the job's model backend
(inference.backends: ``complete(queries, sampling)``), `sampling` its sampling settings.
"""

from __future__ import annotations

from typing import Any

from protocols.base import LETTERS
from protocols.kit.prompting import (
    ItemInput,
    Media,
    MediaError,
    ModelQuery,
    ModelReply,
    PreparedQuery,
    frames_param,
    image,
    letter_subsets,
    lettered,
    render_prompt,
    text,
    user,
)

from .prompts import _ONE, DEFAULT_FRAMES, reply_rule

PROMPT_VERSION = "multistage-v1"
DEFAULT_CLIPS = 4
VIDEOS = (("video_before", "BEFORE"), ("video_after", "AFTER"))

_CAPTION = (
    "These are consecutive frames from a short clip of a video of an indoor scene. Describe what is visible: "
    "the objects, where they are, their colours and states, and anything that moves or changes. Be concise."
)
_SUMMARY = (
    "Below are descriptions of consecutive clips from one video of a scene, in order.\n{captions}\n"
    "Write one short paragraph summarizing the whole scene: every object mentioned, where it is, and its state."
)
_ANSWER = (
    "Two videos of the same place were recorded, one before and one after some things in it changed. "
    "You cannot see them, but here are summaries of each.\n"
    "Summary of the video BEFORE the change: {before}\n"
    "Summary of the video AFTER the change: {after}\n"
    "Question: {question}\n{options}\n{rule}"
)


def _clips(urls: list[str], n_clips: int) -> list[list[str]]:
    n_clips = max(1, min(n_clips, len(urls)))
    size = len(urls) / n_clips
    return [urls[round(i * size) : round((i + 1) * size)] for i in range(n_clips)]


def _add(total: ModelReply, reply: ModelReply) -> None:
    total.prompt_tokens += reply.prompt_tokens
    total.completion_tokens += reply.completion_tokens
    total.latency_ms += reply.latency_ms
    total.attempts += reply.attempts


def run(
    *, params: dict, items: list[ItemInput], media: Media, backend, sampling: Any, done_ok: set
) -> list[tuple[int, PreparedQuery, ModelReply]]:
    """The "qa" query of each item not in done_ok, answered through the three stages. An item that
    failed in a stage comes back with a query-less PreparedQuery and a reply carrying the error
    and the usage of the stages it went through."""
    params = dict(params)
    n = frames_param(params, DEFAULT_FRAMES)
    n_clips = int(params.get("clips", DEFAULT_CLIPS))
    answered: list[tuple[int, PreparedQuery, ModelReply]] = []
    usage: dict[int, ModelReply] = {}
    errors: dict[int, str] = {}
    indices: dict[int, dict[str, list[int]]] = {}

    # Stage 1: captions of every clip of both videos of every item.
    captions_asked: list[tuple[int, str, int, ModelQuery]] = []
    for item in items:
        if (item.item_pk, "qa") in done_ok:
            continue
        usage[item.item_pk] = ModelReply(key=str(item.item_pk), attempts=0)
        indices[item.item_pk] = {}
        try:
            for field, _ in VIDEOS:
                urls, idx = media.frames(
                    item.media_paths.get(field),
                    n,
                    content_hash=item.media_hashes.get(field),
                    known=item.media_info.get(field),
                )
                indices[item.item_pk][field] = idx
                for c, clip in enumerate(_clips(urls, n_clips)):
                    q = ModelQuery(
                        key=f"{item.item_pk}|caption:{field}:{c}",
                        messages=user([image(u) for u in clip] + [text(_CAPTION)]),
                        max_tokens=int(params.get("caption_max_tokens", 200)),
                    )
                    captions_asked.append((item.item_pk, field, c, q))
        except MediaError as exc:
            errors[item.item_pk] = str(exc)
    captions: dict[tuple[int, str], list[str]] = {}
    live = [entry for entry in captions_asked if entry[0] not in errors]
    replies = backend.complete([q for *_, q in live], sampling) if live else []
    for (item_pk, field, _, _), reply in zip(live, replies):
        _add(usage[item_pk], reply)
        if reply.error:
            errors.setdefault(item_pk, f"caption stage failed: {reply.error}")
        captions.setdefault((item_pk, field), []).append(reply.text.strip())

    # Stage 2: one summary per video.
    summary_asked = []
    for (item_pk, field), texts in captions.items():
        if item_pk in errors:
            continue
        listing = "\n".join(f"Clip {i + 1}: {t}" for i, t in enumerate(texts))
        summary_asked.append(
            (
                item_pk,
                field,
                ModelQuery(
                    key=f"{item_pk}|summary:{field}",
                    messages=user([text(_SUMMARY.format(captions=listing))]),
                    max_tokens=int(params.get("summary_max_tokens", 300)),
                ),
            )
        )
    replies = backend.complete([q for *_, q in summary_asked], sampling) if summary_asked else []
    summaries: dict[tuple[int, str], str] = {}
    for (item_pk, field, _), reply in zip(summary_asked, replies):
        _add(usage[item_pk], reply)
        if reply.error:
            errors.setdefault(item_pk, f"summary stage failed: {reply.error}")
        summaries[(item_pk, field)] = reply.text.strip()

    # Stage 3: the answer from text.
    final: list[tuple[ItemInput, PreparedQuery]] = []
    for item in items:
        if item.item_pk not in usage:
            continue
        options = item.resolved["qa"]["options"]
        if item.item_pk in errors:
            error, spent = errors[item.item_pk], usage[item.item_pk]
            answered.append(
                (
                    item.item_pk,
                    PreparedQuery(
                        key="qa", query=None, options=options, frame_indices=indices.get(item.item_pk), error=error
                    ),
                    ModelReply(
                        key=f"{item.item_pk}|qa",
                        error=error,
                        attempts=spent.attempts,
                        prompt_tokens=spent.prompt_tokens,
                        completion_tokens=spent.completion_tokens,
                    ),
                )
            )
            continue
        rule, min_size = reply_rule(item)
        ask = _ANSWER.format(
            before=summaries[(item.item_pk, "video_before")],
            after=summaries[(item.item_pk, "video_after")],
            question=item.payload["question"],
            options=lettered(options),
            rule=rule,
        )
        messages = user([text(ask)])
        choices = list(LETTERS[: len(options)]) if rule == _ONE else letter_subsets(len(options), min_size=min_size)
        final.append(
            (
                item,
                PreparedQuery(
                    key="qa",
                    query=ModelQuery(key=f"{item.item_pk}|qa", messages=messages, choices=choices, max_tokens=16),
                    options=options,
                    prompt=render_prompt(messages),
                    frame_indices=indices[item.item_pk],
                ),
            )
        )
    replies = backend.complete([p.query for _, p in final], sampling) if final else []
    for (item, prepared), reply in zip(final, replies):
        _add(reply, usage[item.item_pk])
        answered.append((item.item_pk, prepared, reply))
    return answered
