"""Item payloads of the evaluation tests' releases, and the management-command runner they use."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command


def status_payload(i: int) -> dict:
    return {
        "image_a": f"a{i}.jpg",
        "image_b": f"b{i}.jpg",
        "state_a": f"a closed box {i}",
        "state_b": f"an open box {i}",
        "change": f"open box {i}",
        "change_distractors": [f"close box {i}", f"shake box {i}", f"lift box {i}"],
        "category": "positional" if i < 2 else "functional",
        "difference": "slight",
    }


def osc_payload(gen: str, i: int, scenario: str) -> dict:
    return {
        "video": f"{gen}{i}.mp4",
        "prompt": "cut the apple",
        "generator": gen,
        "scenario": scenario,
        "action": "cut",
        "action_category": "cutting",
        "object": "apple",
        "object_category": "fruit",
    }


def vt_items() -> dict[str, dict]:
    """Four VisualTrans questions, one of each answer format and more than one subtask."""
    return {
        "q1": {
            "images": ["i.jpg", "f.jpg"],
            "question": "Which?",
            "format": "choice",
            "options": ["red", "blue", "green"],
            "answer": "B",
            "subtask": "fine_grained",
            "scene": "kitchen",
        },
        "q2": {
            "images": ["i.jpg", "f.jpg"],
            "question": "How many?",
            "format": "count",
            "answer": 3,
            "subtask": "quantitative",
            "scene": "kitchen",
        },
        "q3": {
            "images": ["i.jpg", "f.jpg"],
            "question": "Which objects?",
            "format": "set",
            "answer": ["apple", "Knife"],
            "subtask": "causal",
            "scene": "kitchen",
        },
        "q4": {
            "images": ["i.jpg", "f.jpg"],
            "question": "Next?",
            "format": "choice",
            "options": ["cut", "wash"],
            "answer": "A",
            "subtask": "intermediate",
            "scene": "kitchen",
        },
    }


def run_command(*args) -> str:
    """A management command's standard output."""
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()
