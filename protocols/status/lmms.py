"""STATUS as an lmms-eval task (protocols/kit/lmms.py): six documents per item, StateLab's prompts
(as prompts.py words them), its scoring in lmms_utils.py."""

from __future__ import annotations

from protocols.base import LETTERS
from protocols.kit.lmms import LmmsTask, media_paths
from protocols.kit.prompting import lettered

OSI = (
    "Look closely at the object in this photo. Which description matches the state it is in right now?\n"
    "{options}\nAnswer with the letter of the matching description (A or B) and nothing else."
)
IR = (
    "Here are two photos, labelled A and B, of the same object (photo A is the first image, photo B the "
    "second). Which photo shows {state}?\nAnswer with the letter of the photo (A or B) and nothing else."
)
SCI = (
    "The first photo was taken before and the second photo after something was done to an object. "
    "Which action turns the scene in the first photo into the scene in the second?\n"
    "{options}\nAnswer with the letter of the action ({letters}) and nothing else."
)
METRICS = ["acc_osi", "acc_ir", "acc_sci", "oa", "racc_osi", "racc_ir", "racc_sci", "roa"]


class Task(LmmsTask):
    def documents(self, line: dict) -> list[dict]:
        a, b = media_paths(line["image_a"]), media_paths(line["image_b"])
        meta = {"category": line.get("category"), "difference": line.get("difference")}
        resolved = line.get("resolved") or {}
        docs = []
        for key in self.protocol.query_keys:
            q = resolved[key]
            options = q["options"]
            if key in ("osi_a", "osi_b"):
                prompt, visuals = OSI.format(options=lettered(options)), a if key == "osi_a" else b
            elif key in ("ir_a", "ir_b"):
                state = line["state_a"] if key == "ir_a" else line["state_b"]
                prompt, visuals, options = IR.format(state=state), a + b, ["photo A", "photo B"]
            else:
                letters = ", ".join(LETTERS[: len(options)])
                prompt, visuals = SCI.format(options=lettered(options), letters=letters), a + b
            doc = self.document(
                line,
                key,
                prompt=prompt,
                options=options,
                fmt="choice",
                visuals=visuals,
                kind="image",
                target=q["answer"],
                meta=meta,
            )
            if q.get("unshown"):
                # The item's distractors the two-option query leaves out: a reply naming one is
                # wrong, as StateLab reads it (protocols/kit/answers.py parse_choice).
                doc["unshown"] = [str(t) for t in q["unshown"]]
            docs.append(doc)
        return docs

    def metrics(self, metas: list[dict]) -> list[str]:
        return list(METRICS)
