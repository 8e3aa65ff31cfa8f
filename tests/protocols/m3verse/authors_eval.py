"""The M3-Verse pipeline's loading steps, written here from what its scripts do (not their code):
its filtering and rewriting step reads the QA file line by line into a record of exactly the eleven
fields the QA generator writes (an unknown or missing key stops it), and strips each option's
leading "<letter>. " (its first three characters) before rewriting; the capability step adds
"capabilities" to such lines. Each scene's recordings are data/<scene_id>/state_0.mp4 (before)
and state_1.mp4 (after)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class QARecord:
    scene_id: str
    category: str
    question_id: str
    state_type: str
    question: str
    options: list[str]
    answer: list[str]
    question_type: str
    subcategory: str
    generator_name: str
    hallucination: bool


def load(qa_file: Path, data: Path) -> list[QARecord]:
    records = []
    for text in qa_file.read_text(encoding="utf-8").splitlines():
        row = json.loads(text)
        row.pop("capabilities", None)  # the tagging step's addition
        record = QARecord(**row)  # TypeError on any other key, as the step's record type
        letters = [option[:3] for option in record.options]
        assert letters == [f"{chr(65 + i)}. " for i in range(len(record.options))], record.options
        assert set(record.answer) <= {letter[0] for letter in letters}, record.answer
        assert record.state_type in ("intra-state", "inter-states"), record.state_type
        assert record.question_id.startswith(f"{record.scene_id}-"), record.question_id
        for name in ("state_0.mp4", "state_1.mp4"):
            assert (data / record.scene_id / name).is_file(), (record.scene_id, name)
        records.append(record)
    return records
