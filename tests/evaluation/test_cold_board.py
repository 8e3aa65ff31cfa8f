"""The board's readers (evaluation/selectors.py: rows through server-side cursors, JSON decoded in
bulk) give exactly what the ORM readers they replaced gave, and so the same boards, for every
protocol. The old readers are kept here only, as the oracle."""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.utils import timezone

from annotation.importing.samples import sample_line
from annotation.models import Item, ItemStatus, Project, ReleaseItem
from evaluation import leaderboard, selectors
from evaluation.scoring.answer_sets import ModelAnswer, ScoringItem
from inference.models import InferenceJob, JobMode, JobStatus, Prediction, PredictionStatus
from inference.selectors import job_items
from protocols import registry
from tests.evaluation.factories import make_release

pytestmark = pytest.mark.django_db

PROTOCOLS = ("status", "changeit", "visualtrans", "oscbench", "m3verse")


def old_scoring_items(project, release):
    return [
        ScoringItem(key=i.key, external_id=i.external_id, payload=i.payload, resolved=i.resolved)
        for i in job_items(project=project, release=release)
    ]


def old_job_answers(job):
    rows = Prediction.objects.filter(job=job).values_list("item_id", "query", "status", "answer", "options", "logprobs")
    out = {}
    for item_id, query, status, answer, options, logprobs in rows.iterator(chunk_size=5000):
        value = answer if status == PredictionStatus.OK else None
        out[(item_id, query)] = ModelAnswer(value, options or None, logprobs)
    return out


def _line(protocol: str, i: int) -> dict:
    line = sample_line(protocol, i)
    line.pop("id")
    line.pop("tags", None)
    return line


def _predictions(job, items, rng) -> None:
    """A mixed answer set: the protocol's own random answers, with failed and missing predictions,
    option orders seen reversed or not stored, log-probs, and odd JSON (text with tabs, quotes and
    backslashes, lists, objects, JSON null)."""
    answers = registry.get(job.protocol).scoring.random_answer_set(items, rng=rng)
    odd = ['B\t\\ "é"\n', [1, "A"], {"k": [0.5, None]}, None]
    rows = []
    for n, ((key, query), ans) in enumerate(answers.items()):
        if n % 11 == 10:
            continue  # no prediction for this query
        options = list(ans.options or [])
        value = ans.value
        if n % 5 == 1 and len(options) == 2 and isinstance(value, str) and value in "AB":
            options, value = options[::-1], "AB"["BA".index(value)]
        if n % 7 == 3:
            options = []
        if n % 13 == 6:
            value = odd[(n // 13) % len(odd)]
        logprobs = None
        if n % 3 == 0:
            p = float(rng.uniform(0.05, 0.95))
            logprobs = {"A": float(np.log(p)), "B": float(np.log1p(-p)), "C\t\\": -12.5}
        status = PredictionStatus.FAILED if n % 17 == 8 else PredictionStatus.OK
        rows.append(
            Prediction(
                job=job, item_id=key, query=query, status=status, answer=value, options=options, logprobs=logprobs
            )
        )
    Prediction.objects.bulk_create(rows)


def _job(project, release, name):
    return InferenceJob.objects.create(
        project=project,
        release=release,
        model_name=name,
        protocol=project.protocol,
        mode=JobMode.IMPORTED,
        status=JobStatus.FINISHED,
        finished_at=timezone.now(),
    )


def _project(protocol: str):
    project = Project.objects.create(slug=f"cold-{protocol}", name=protocol, protocol=protocol)
    release = make_release(project, {f"x{i}": _line(protocol, i) for i in range(14)})
    # An item frozen before option orders were stored with it: the reader resolves it.
    first = ReleaseItem.objects.get(release=release, position=0)
    first.payload = {k: v for k, v in first.payload.items() if k != "resolved"}
    first.save()
    # Live board: verified items after the freeze count, others do not.
    for i in range(14, 18):
        status = ItemStatus.VERIFIED if i % 2 else ItemStatus.PENDING
        Item.objects.create(project=project, external_id=f"x{i}", payload=_line(protocol, i), status=status)
    rng = np.random.default_rng(5)
    _predictions(_job(project, release, "model-a"), old_scoring_items(project, release), rng)
    _predictions(_job(project, release, "model-b"), old_scoring_items(project, release), rng)
    _predictions(_job(project, None, "model-live"), old_scoring_items(project, None), rng)
    return project, release


def _boards(project) -> dict:
    """The release's board (for a rating protocol: from the ratings, and from one judge's answers)."""
    judges = [None]
    if registry.get(project.protocol).board == "generators":
        judges.append("model-a")
    return {
        judge: json.dumps(leaderboard.build(project, release_version="v1", judge=judge, n_boot=50), sort_keys=True)
        for judge in judges
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_readers_give_what_the_orm_readers_gave(protocol):
    project, release = _project(protocol)
    for rel in (release, None):
        new, old = selectors.scoring_items(project, rel), old_scoring_items(project, rel)
        assert new == old and len(new) == (14 if rel else 16)
    jobs = list(InferenceJob.objects.filter(project=project))
    assert len(jobs) == 3
    for job in jobs:
        new, old = selectors.job_answers(job), old_job_answers(job)
        assert new == old and len(new) > 10
    failed = [a for a in selectors.job_answers(jobs[0]).values() if a.value is None]
    assert failed  # failed predictions and JSON null answers read as None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_boards_are_identical_with_either_reader(protocol, monkeypatch):
    project, _ = _project(protocol)
    new = _boards(project)
    monkeypatch.setattr(selectors, "scoring_items", old_scoring_items)
    monkeypatch.setattr(selectors, "job_answers", old_job_answers)
    old = _boards(project)
    assert new == old
    rows = [row["model"] for board in new.values() for row in json.loads(board)["rows"]]
    if registry.get(protocol).board == "generators":
        assert "Random" in rows and len(set(rows)) >= 3  # per generator, then Random
    else:
        assert {"model-a", "model-b", "Random"} <= set(rows)


def test_a_reader_change_would_show(monkeypatch):
    """The comparison can fail: a reader that drops the seen option order changes the board."""
    project, _ = _project("status")
    new = _boards(project)

    def forgetful(job):
        return {k: ModelAnswer(a.value, None, a.logprobs) for k, a in old_job_answers(job).items()}

    monkeypatch.setattr(selectors, "job_answers", forgetful)
    assert _boards(project) != new
