"""OSCBench judge: K frames of a generated video, the text prompt it was made from and the
rubric; the judge writes its evidence first, then a 1-5 score per criterion, as JSON."""

from __future__ import annotations

from typing import Any

from protocols.kit.prompting import (
    ItemInput,
    Media,
    MediaError,
    PreparedQuery,
    failed,
    frames_param,
    image,
    query_for,
    render_prompt,
    text,
    user,
)
from protocols.oscbench import CRITERIA, NULLABLE

PROMPT_VERSION = "oscbench-judge-v1"
JUDGE_KEY = "judge"  # the one query of an item (OSCBench.query_keys), asked under JUDGE_SCHEMA
JSON_QUERIES = (JUDGE_KEY,)  # asked under a JSON schema (inference.prompting.json_queries)
DEFAULT_FRAMES = 20

# StateLab's own wording; a project's settings["rubric"] (text, or criterion -> text) replaces it.
DEFAULT_RUBRIC: dict[str, str] = {
    "subject": "Is the acting subject named in the prompt (a person, a hand, an animal) present and correct? "
    "Use null when the prompt names no subject.",
    "object": "Is the object named in the prompt present and recognisably the right kind of object?",
    "action": "Is the action in the prompt actually carried out on the object?",
    "osc_accuracy": "Does the object end in the state the prompt implies (e.g. sliced, melted, folded)?",
    "osc_consistency": "Does the object's state change progress plausibly and stay coherent from frame to frame, "
    "without jumps, reversals or the object changing identity?",
    "scene": "Does the setting match the place the prompt describes? Use null when the prompt names no place.",
    "realism": "Do objects, materials and motion look physically plausible?",
    "aesthetics": "Is the video well composed, sharp and pleasant to look at?",
}
SCALE = "1 = not at all, 2 = poorly, 3 = partly, 4 = mostly, 5 = fully."


def _score_schema(nullable: bool) -> dict[str, Any]:
    if nullable:
        return {"anyOf": [{"type": "integer", "enum": [1, 2, 3, 4, 5]}, {"type": "null"}]}
    return {"type": "integer", "enum": [1, 2, 3, 4, 5]}


JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "evidence": {"type": "string"},
        "scores": {
            "type": "object",
            "properties": {c: _score_schema(c in NULLABLE) for c in CRITERIA},
            "required": list(CRITERIA),
            "additionalProperties": False,
        },
    },
    "required": ["evidence", "scores"],
    "additionalProperties": False,
}


def rubric_text(rubric: Any) -> str:
    if isinstance(rubric, str) and rubric.strip():
        return rubric.strip()
    source = rubric if isinstance(rubric, dict) and rubric else DEFAULT_RUBRIC
    lines = []
    for criterion in CRITERIA:
        entry = source.get(criterion, DEFAULT_RUBRIC[criterion])
        if isinstance(entry, dict):  # {"title": ..., "description": ...}
            entry = entry.get("description") or entry.get("text") or entry.get("title") or DEFAULT_RUBRIC[criterion]
        lines.append(f"- {criterion}: {entry}")
    return "\n".join(lines)


def build(item: ItemInput, *, media: Media, params: dict[str, Any]) -> list[PreparedQuery]:
    p = item.payload
    options = list(item.resolved[JUDGE_KEY]["options"])
    n = frames_param(params, DEFAULT_FRAMES)
    try:
        urls, indices = media.frames(
            item.media_paths.get("video"),
            n,
            content_hash=item.media_hashes.get("video"),
            known=item.media_info.get("video"),
        )
    except MediaError as exc:
        return [failed(JUDGE_KEY, options, str(exc))]
    ask = (
        "You are judging a video made by a text-to-video model. Above are "
        f"{len(urls)} frames sampled evenly from it, in order.\n"
        f'The prompt given to the model was: "{p["prompt"]}"\n\n'
        f"Rate the video on each criterion below. Scale: {SCALE}\n{rubric_text(params.get('rubric'))}\n\n"
        "First write your evidence: what you see in the frames that bears on each criterion. Then give the scores. "
        'Reply with one JSON object only: {"evidence": "...", "scores": {"subject": 1-5 or null, "object": 1-5, '
        '"action": 1-5, "osc_accuracy": 1-5, "osc_consistency": 1-5, "scene": 1-5 or null, "realism": 1-5, '
        '"aesthetics": 1-5}}.'
    )
    messages = user([image(u) for u in urls] + [text(ask)])
    return [
        PreparedQuery(
            key=JUDGE_KEY,
            query=query_for(
                JUDGE_KEY, item, messages, json_schema=JUDGE_SCHEMA, max_tokens=int(params.get("judge_max_tokens", 800))
            ),
            options=options,
            prompt=render_prompt(messages),
            frame_indices={"video": indices},
        )
    ]
