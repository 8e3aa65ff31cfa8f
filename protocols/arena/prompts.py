"""Arena judge: an MLLM compares the two outputs of one prompt and answers which is better, a tie,
or that both are bad (docs/protocols/arena.md, "MLLM judges").

Every pair is asked twice, once per order (``JUDGE_KEYS``): ``judge_ab`` shows output a first,
``judge_ba`` output b first. The two asks carry the same words; only the media differ, so a judge
that prefers whatever it is shown first gives itself away (judging.py: swap consistency, position
bias). The judge answers with a letter of ``VERDICT_OPTIONS`` (the protocol's answer kind is
"choice": protocols/kit/answers.py); ``verdict(query, letter)`` turns that letter back into the
item's terms ("a", "b", "tie", "both_bad"), whichever order it was shown in.

A video is shown as ``frames`` frames (default ``DEFAULT_FRAMES``) sampled evenly from it, an
image as itself (inference.prompting.MediaPreparer prepares both).
"""

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
    lettered,
    query_for,
    render_prompt,
    text,
    user,
)

from .fields import SIDES, media_kind

PROMPT_VERSION = "arena-judge-v1"
DEFAULT_FRAMES = 8
# The two asks of one pair: the order its outputs are shown in, in the item's terms.
JUDGE_KEYS = ("judge_ab", "judge_ba")
SHOWN = {"judge_ab": ("a", "b"), "judge_ba": ("b", "a")}
# The judge's options in letter order (A, B, C, D); "first" and "second" are the outputs as shown.
VERDICT_OPTIONS = ("Output A is better", "Output B is better", "Tie: both are equally good", "Both are bad")
ANSWER_LETTERS = tuple(LETTERS[: len(VERDICT_OPTIONS)])  # A, B, C, D
# A letter's meaning in shown terms: the output shown first or second won, or a tie, or both bad.
_SHOWN_VERDICT = {"A": 0, "B": 1, "C": "tie", "D": "both_bad"}


def resolved_queries() -> dict[str, dict[str, Any]]:
    """The arena's resolved queries (Protocol.resolve_queries): each ask's options, no known answer."""
    return {key: {"options": list(VERDICT_OPTIONS), "answer": None} for key in JUDGE_KEYS}


def verdict(query: str, letter: Any) -> str | None:
    """The item's-terms verdict ("a", "b", "tie", "both_bad") of a parsed reply ``letter`` to the
    ask ``query`` (one of JUDGE_KEYS); None for no answer, an unknown ask or a letter outside A-D."""
    if query not in SHOWN or not isinstance(letter, str) or letter not in _SHOWN_VERDICT:
        return None
    meaning = _SHOWN_VERDICT[letter]
    return SHOWN[query][meaning] if isinstance(meaning, int) else meaning


def shown_first(query: str) -> str | None:
    """The side ("a" or "b") the ask ``query`` shows first."""
    return SHOWN[query][0] if query in SHOWN else None


def _output(item: ItemInput, media: Media, kind: str, side: str, n: int) -> tuple[list[str], list[int] | None]:
    """One output's images as data URLs, and for a video the frame indices sampled."""
    field = f"{kind}_{side}"
    if kind == "image":
        return [media.image(item.media_paths.get(field))], None
    return media.frames(
        item.media_paths.get(field),
        n,
        content_hash=item.media_hashes.get(field),
        known=item.media_info.get(field),
    )


def _ask(kind: str, prompt: str, counts: tuple[int, int]) -> str:
    shown = (
        f"Output A is the {counts[0]} frames sampled evenly from the first video, in order; "
        f"output B the {counts[1]} frames of the second video."
        if kind == "video"
        else "Output A is the first image, output B the second."
    )
    noun = "videos" if kind == "video" else "images"
    return (
        f"You are comparing two {noun} that two generative models made from the same prompt. {shown}\n"
        f'The prompt was: "{prompt}"\n\n'
        "Which output follows the prompt better (the subject, the action, the state change it asks for) and "
        "looks more realistic? Judge the content, not the order the outputs are shown in.\n"
        f"{lettered(list(VERDICT_OPTIONS))}\n"
        "Answer with the letter of your verdict (A, B, C or D) and nothing else."
    )


def build(item: ItemInput, *, media: Media, params: dict[str, Any]) -> list[PreparedQuery]:
    """The two asks of one pair (JUDGE_KEYS), the outputs in each ask's order. An output that
    cannot be prepared fails both asks with the reason; an item with no whole pair fails them too."""
    options = list(VERDICT_OPTIONS)
    kind = media_kind(item.payload)
    if kind is None:
        why = "the item shows no whole pair (video_a and video_b, or image_a and image_b)"
        return [failed(key, options, why) for key in JUDGE_KEYS]
    n = frames_param(params, DEFAULT_FRAMES)
    outputs: dict[str, tuple[list[str], list[int] | None]] = {}
    try:
        for side in SIDES:
            outputs[side] = _output(item, media, kind, side, n)
    except MediaError as exc:
        return [failed(key, options, str(exc)) for key in JUDGE_KEYS]
    max_tokens = int(params.get("judge_max_tokens", 16))
    out = []
    for key in JUDGE_KEYS:
        first, second = SHOWN[key]
        (urls_1, _), (urls_2, _) = outputs[first], outputs[second]
        parts = [text("Output A:")] + [image(u) for u in urls_1] + [text("Output B:")] + [image(u) for u in urls_2]
        parts.append(text(_ask(kind, str(item.payload.get("prompt", "")), (len(urls_1), len(urls_2)))))
        messages = user(parts)
        frame_indices = (
            {f"video_{side}": list(outputs[side][1] or []) for side in (first, second)} if kind == "video" else None
        )
        out.append(
            PreparedQuery(
                key=key,
                query=query_for(key, item, messages, choices=list(ANSWER_LETTERS), max_tokens=max_tokens),
                options=options,
                prompt=render_prompt(messages),
                frame_indices=frame_indices,
            )
        )
    return out
