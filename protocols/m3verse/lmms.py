"""M3-Verse as an lmms-eval task (protocols/kit/lmms.py): one document per item with StateLab's
prompt (as prompts.py words it), the two videos as file paths, its scoring in lmms_utils.py."""

from __future__ import annotations

from protocols.kit.lmms import LmmsTask, media_paths
from protocols.kit.prompting import lettered

from .lmms_utils import CAPABILITIES

INTRO = (
    "You are shown two videos of the same place, the first recorded before and the second after some "
    "things in it changed. Compare them to answer the question."
)
ONE = "Exactly one option is correct. Answer with its letter and nothing else."
ANY = (
    "One or more options may be correct. Answer with the letters of all correct options, separated by commas "
    "(for example A,C), and nothing else."
)
# The leaderboard's order (lmms_utils.METRICS), of which a task lists the groups its items fill.
ORDER = (
    ["overall", "intra", "inter"]
    + [f"{c}_{cap}" for c in ("intra", "inter") for cap in CAPABILITIES]
    + ["hallucination", "factual"]
)


class Task(LmmsTask):
    def documents(self, line: dict) -> list[dict]:
        q = (line.get("resolved") or {})["qa"]
        options = q["options"]
        rule = ANY if self.protocol.answer_shape(line, self.settings)["multiple"] else ONE
        prompt = f"{INTRO}\nQuestion: {line['question']}\n{lettered(options)}\n{rule}"
        meta = {
            "context": line.get("context"),
            "capabilities": list(line.get("capabilities") or []),
            "hallucination": bool(line.get("hallucination")),
        }
        visuals = media_paths(line["video_before"]) + media_paths(line["video_after"])
        return [
            self.document(
                line,
                "qa",
                prompt=prompt,
                options=options,
                fmt="letters",
                visuals=visuals,
                kind="video",
                target=q["answer"],
                meta=meta,
            )
        ]

    def metrics(self, metas: list[dict]) -> list[str]:
        """The groups the items fill, in ORDER."""
        filled: set[str] = {"overall"}
        for m in metas:
            filled.add(m.get("context") or "")
            filled.update(f"{m.get('context')}_{cap}" for cap in m.get("capabilities") or [])
            filled.add("hallucination" if m.get("hallucination") else "factual")
        return [k for k in ORDER if k in filled]
