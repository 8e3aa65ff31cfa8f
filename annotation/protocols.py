"""Protocol facts shared by import, export, inference and scoring. Plain Python, no Django.

Every option order shown to a model is derived here from (seed, item id, query key), so the
same release always yields the same prompts and a stored run can be re-scored and audited.
"""
from __future__ import annotations

import random
import string
from typing import Any, Iterable, Mapping

LETTERS = string.ascii_uppercase

PROTOCOLS = ("status", "changeit", "visualtrans", "m3verse", "oscbench")

# Media fields per protocol: name -> "image" | "video" | "images" (list of images).
MEDIA_FIELDS: dict[str, dict[str, str]] = {
    "status": {"image_a": "image", "image_b": "image"},
    "changeit": {"image": "image"},
    "visualtrans": {"images": "images"},
    "m3verse": {"video_before": "video", "video_after": "video"},
    "oscbench": {"video": "video"},
}

QUERY_KEYS: dict[str, tuple[str, ...]] = {
    "status": ("osi_a", "osi_b", "ir_a", "ir_b", "sci2", "sci4"),
    "changeit": (
        "state:standard:full",
        "state:standard:crop",
        "state:distractor:full",
        "state:distractor:crop",
    ),
    "visualtrans": ("qa",),
    "m3verse": ("qa",),
    "oscbench": ("judge",),
}

OSC_CRITERIA = (
    "subject",
    "object",
    "action",
    "osc_accuracy",
    "osc_consistency",
    "scene",
    "realism",
    "aesthetics",
)
# Criteria that may be N/A when the prompt names no subject / no scene.
OSC_NULLABLE = ("subject", "scene")
OSC_SCENARIOS = ("regular", "novel", "compositional")
# A rating of a gold item (its known answer: `gold_scores`, criterion -> expected 1..5 or null for
# N/A) is right when every criterion given is within this many points of the expected score, and
# N/A exactly where N/A is expected. Raters differ by a point on a Likert scale without either
# being wrong; two points apart is a different judgement (the disagreement view's default spread).
RATING_GOLD_TOLERANCE = 1

VISUALTRANS_SUBTASKS = ("fine_grained", "global", "intermediate", "causal", "planning", "quantitative")
VISUALTRANS_DIMENSIONS = {
    "spatial": ("fine_grained", "global"),
    "procedural": ("intermediate", "causal", "planning"),
    "quantitative": ("quantitative",),
}
M3VERSE_CAPABILITIES = ("spatial", "temporal", "attribute", "reasoning")
STATUS_CATEGORIES = ("positional", "functional", "other")
STATUS_DIFFERENCES = ("slight", "significant")
# How a QA item is answered: an option letter (or letters), a whole number, a list of objects.
QA_FORMATS = ("choice", "count", "set")
QA_FLAGS = ("missing_correct_option", "wrong_ground_truth", "ambiguous", "insufficient_evidence")
BOX_OUTCOMES = ("nothing_to_label", "cannot_determine")

CHANGEIT_CANDIDATES = 10


# M3-Verse: whether several options may be correct when neither the item (its `multiple` field)
# nor the project (settings["multiple"]) says; PROTOCOLS.md: several may be correct.
M3VERSE_MULTIPLE_DEFAULT = True


def m3verse_multiple(payload: Mapping[str, Any], project_settings: Mapping[str, Any] | None = None) -> bool:
    """Whether an M3-Verse item takes several letters: its own `multiple` field, else the project's
    setting, else M3VERSE_MULTIPLE_DEFAULT. Never its answer: a gold item's form must look like a
    raw one's (issue 10, blind means blind)."""
    own = payload.get("multiple")
    if isinstance(own, bool):
        return own
    chosen = (project_settings or {}).get("multiple")
    return chosen if isinstance(chosen, bool) else M3VERSE_MULTIPLE_DEFAULT


def qa_shape(*, protocol: str, payload: Mapping[str, Any],
             project_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The answer a QA item takes: {"format", "n_options", "multiple"} (the facts a model's prompt
    states too). An M3-Verse item takes one or several letters as `m3verse_multiple` says (from the
    item's field or the project's setting, never from the answer); VisualTrans items take one."""
    if protocol == "m3verse":
        multiple = m3verse_multiple(payload, project_settings)
        return {"format": "choice", "n_options": len(payload.get("options") or []), "multiple": multiple}
    fmt = payload.get("format") or "choice"
    return {"format": fmt, "n_options": len(payload.get("options") or []), "multiple": False}


def seeded_rng(seed: int, item_id: str, key: str) -> random.Random:
    # random.Random seeded with a str is stable across processes and Python versions (v2 seeding).
    return random.Random(f"{seed}:{item_id}:{key}")


def letter(index: int) -> str:
    return LETTERS[index]


def _shuffled(options: list[str], rng: random.Random) -> list[str]:
    out = list(options)
    rng.shuffle(out)
    return out


def changeit_vocabulary(payloads: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """object -> sorted list of state labels seen in a set of ChangeIt items (including distractors)."""
    vocab: dict[str, set[str]] = {}
    for p in payloads:
        vocab.setdefault(p["object"], set()).add(p["state"])
    return {obj: sorted(states) for obj, states in sorted(vocab.items())}


def _changeit_candidates(payload: dict[str, Any], strategy: str, vocabulary: dict[str, list[str]], rng: random.Random) -> list[str]:
    truth = payload["state"]
    obj = payload["object"]
    picked: list[str] = [truth]
    if strategy == "standard":
        first = [s for s in vocabulary.get(obj, []) if s != truth]
    else:
        first = [s for s in payload.get("distractors", []) if s != truth]
    for label in first:
        if len(picked) >= CHANGEIT_CANDIDATES:
            break
        if label not in picked:
            picked.append(label)
    others = sorted({s for o, states in vocabulary.items() if o != obj for s in states} - set(picked))
    rng.shuffle(others)
    for label in others:
        if len(picked) >= CHANGEIT_CANDIDATES:
            break
        picked.append(label)
    rng.shuffle(picked)
    return picked


def resolve_queries(
    protocol: str,
    item_id: str,
    payload: dict[str, Any],
    *,
    seed: int,
    vocabulary: dict[str, list[str]] | None = None,
) -> dict[str, dict[str, Any]]:
    """The queries of one item with their option orders and correct answers.

    Returns {query_key: {"options": [...], "answer": ...}} where answer is a letter (status,
    visualtrans choice), a 1-based candidate number (changeit), a list of letters (m3verse),
    an integer / list of strings (visualtrans count / set) or None (oscbench judge).
    """
    if protocol == "status":
        states = [payload["state_a"], payload["state_b"]]
        images = [payload["image_a"], payload["image_b"]]
        sci2 = _shuffled([payload["change"], payload["change_distractors"][0]], seeded_rng(seed, item_id, "sci2"))
        sci4 = _shuffled([payload["change"], *payload["change_distractors"][:3]], seeded_rng(seed, item_id, "sci4"))
        return {
            "osi_a": {"options": states, "answer": "A"},
            "osi_b": {"options": states, "answer": "B"},
            "ir_a": {"options": images, "answer": "A"},
            "ir_b": {"options": images, "answer": "B"},
            "sci2": {"options": sci2, "answer": letter(sci2.index(payload["change"]))},
            "sci4": {"options": sci4, "answer": letter(sci4.index(payload["change"]))},
        }
    if protocol == "changeit":
        vocab = vocabulary if vocabulary is not None else changeit_vocabulary([payload])
        out: dict[str, dict[str, Any]] = {}
        for strategy in ("standard", "distractor"):
            # Full and crop share one candidate list so the two conditions differ only in the image.
            cands = _changeit_candidates(payload, strategy, vocab, seeded_rng(seed, item_id, f"changeit:{strategy}"))
            for condition in ("full", "crop"):
                out[f"state:{strategy}:{condition}"] = {"options": cands, "answer": cands.index(payload["state"]) + 1}
        return out
    if protocol == "visualtrans":
        return {"qa": {"options": list(payload.get("options") or []), "answer": payload.get("answer"), "format": payload.get("format")}}
    if protocol == "m3verse":
        return {"qa": {"options": list(payload["options"]), "answer": sorted(payload["answer"])}}
    if protocol == "oscbench":
        return {"judge": {"options": list(OSC_CRITERIA), "answer": None}}
    raise ValueError(f"unknown protocol {protocol!r}")
