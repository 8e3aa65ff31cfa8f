"""VisualTrans as an lmms-eval task (protocols/kit/lmms.py): one document per item with StateLab's
prompt (as prompts.py words it), its scoring in lmms_utils.py."""

from __future__ import annotations

from protocols.base import LETTERS
from protocols.kit.lmms import LmmsTask, media_paths
from protocols.kit.prompting import lettered

INTRO = "The first image shows a scene before a transformation and the second image shows it afterwards."
REPLY = {
    "choice": "Answer with the letter of the correct option ({letters}) and nothing else.",
    "count": "Answer with a single whole number and nothing else.",
    "set": "List every correct answer, separated by commas, and nothing else.",
}
# The subtasks in the leaderboard's order, each dimension's mean after its last subtask.
_LAYOUT = (
    ("fine_grained", None),
    ("global", "spatial_mean"),
    ("intermediate", None),
    ("causal", None),
    ("planning", "procedural_mean"),
    ("quantitative", None),
)
_DIMENSIONS = {"spatial_mean": {"fine_grained", "global"}, "procedural_mean": {"intermediate", "causal", "planning"}}


class Task(LmmsTask):
    max_new_tokens = 64

    def documents(self, line: dict) -> list[dict]:
        q = (line.get("resolved") or {})["qa"]
        options = q["options"]
        fmt = line.get("format") or ("choice" if options else "count")
        images = media_paths(line.get("images") or [])
        labels = ["Image 1 (initial state)", "Image 2 (final state)"] + [
            f"Image {i + 1} (candidate)" for i in range(2, len(images))
        ]
        prompt = f"{INTRO}\nThe images, in order: {', '.join(labels[: len(images)])}.\nQuestion: {line['question']}"
        if fmt == "choice":
            prompt += (
                "\n" + lettered(options) + "\n" + REPLY["choice"].format(letters=", ".join(LETTERS[: len(options)]))
            )
        else:
            prompt += "\n" + REPLY[fmt]
        meta = {"subtask": line.get("subtask"), "scene": line.get("scene")}
        return [
            self.document(
                line,
                "qa",
                prompt=prompt,
                options=options,
                fmt=fmt,
                visuals=images,
                kind="image",
                target=q["answer"],
                meta=meta,
            )
        ]

    def metrics(self, metas: list[dict]) -> list[str]:
        """The subtasks present, each dimension's mean where one of its subtasks is, then overall."""
        present = {m.get("subtask") for m in metas}
        keys = []
        for sub, dim in _LAYOUT:
            if sub in present:
                keys.append(sub)
            if dim and present & _DIMENSIONS[dim]:
                keys.append(dim)
        return keys + ["overall"]
