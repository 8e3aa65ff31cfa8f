"""Suggestions: what a suggest job's predictions leave on the annotation form of their items."""

from __future__ import annotations

from django.db import transaction

from annotation.models import Suggestion

from ..models import InferenceJob
from ..prompting import get_protocol
from .predictions import PredictionRow


def suggestion_source(job: InferenceJob) -> str:
    return f"job:{job.pk} {job.model_name}"[:200]


@transaction.atomic
def suggestions_store(*, job: InferenceJob, rows: list[PredictionRow]) -> int:
    """Machine-made answers that pre-fill the annotation form, marked as such."""
    source = suggestion_source(job)
    # Prompts that draft the whole form (``parse_suggestion``) leave its fields; others an answer.
    drafts_form = hasattr(get_protocol(job.protocol), "parse_suggestion")
    for r in rows:
        if drafts_form:
            result = dict(r.answer)
        else:
            result = {"answer": r.answer}
        result.update({"machine": True, "job": job.pk, "model": job.model_name})
        Suggestion.objects.update_or_create(item_id=r.item_id, source=source, defaults={"result": result})
    return len(rows)
