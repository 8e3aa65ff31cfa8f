"""A stub lmms-eval model for the lmms-eval tier: fixed answers, no weights.

It subclasses lmms-eval's own model base class (`lmms_eval.api.model.lmms`) and answers each
request from a JSON file {"<doc id>|<query>": "<reply text>"} (model_args `answers=FILE`); a
document with no entry gets an empty reply. It calls the task's `doc_to_visual` for every request,
so the task's media loading runs too, and records what it saw in `seen=FILE` when given.
"""

from __future__ import annotations

import json

from lmms_eval.api.model import lmms
from lmms_eval.api.registry import register_model


@register_model("statelab_stub")
class StubModel(lmms):
    def __init__(self, answers: str = "", seen: str = "", **kwargs) -> None:
        super().__init__()
        self.answers = json.load(open(answers, encoding="utf-8")) if answers else {}
        self.seen_path = seen

    def generate_until(self, requests) -> list[str]:
        out, seen = [], []
        for request in requests:
            context, gen_kwargs, doc_to_visual, doc_id, task, split = request.args
            doc = self.task_dict[task][split][doc_id]
            visuals = doc_to_visual(doc)
            seen.append(
                {
                    "id": doc["id"],
                    "query": doc["query"],
                    "context": context,
                    "visuals": [getattr(v, "size", v) for v in visuals],
                    "max_new_tokens": gen_kwargs.get("max_new_tokens"),
                }
            )
            out.append(self.answers.get(f"{doc['id']}|{doc['query']}", ""))
        if self.seen_path:
            with open(self.seen_path, "w", encoding="utf-8") as fh:
                json.dump(seen, fh, default=list)
        return out

    def loglikelihood(self, requests):
        raise NotImplementedError("the StateLab tasks only generate")

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("the StateLab tasks are single-round")
