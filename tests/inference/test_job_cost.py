"""Tokens and cost per job and per correct answer: the endpoint's prices, the tokens the OpenAI-compatible
stand-in reports in each reply's `usage` (real HTTP), answers from the response cache at no cost, and
the count of correct answers the scorer gives when the job's results are written."""

from __future__ import annotations

import importlib
import json
from decimal import Decimal

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError

from inference import selectors, services
from inference.admin_endpoints import EndpointForm
from inference.models import InferenceJob, JobStatus, ModelEndpoint, Prediction, PredictionStatus
from inference.selectors import job_cost_per_correct, job_items, metrics_correct

from . import factories
from .openai_standin import StandIn

SCORER = "tests.inference.test_job_cost.metrics_with_correct"


def metrics_with_correct(job):
    """The project's scorer (evaluation.leaderboard.job_metrics) plus the count of correct answers: the
    protocol's own scoring of the job's answers, the numerator of its headline metric (the first of
    its ranking), as the evaluation app is to give it."""
    from evaluation import leaderboard
    from evaluation import selectors as evaluation_selectors
    from protocols import registry

    protocol = registry.get(job.protocol)
    metrics = leaderboard.job_metrics(job)
    items = evaluation_selectors.scoring_items(job.project, job.release)
    matrix = protocol.scoring.score(items, evaluation_selectors.job_answers(job))
    return {**metrics, "correct": int(matrix.num[:, matrix.column(protocol.ranking[0])].sum())}


def _judge(standin, **fields):
    return services.endpoint_create(
        name="priced-judge", backend="openai", model_id="standin-1", base_url=standin.base_url, **fields
    )


# --- prices on the endpoint ------------------------------------------------------------------


@pytest.mark.django_db
def test_prices_given_among_the_options_become_the_endpoints_fields():
    endpoint = services.endpoint_create(
        name="R", backend="random", options={"seed": 3, "price_per_1m_input": "2.5", "price_per_1m_output": 10}
    )
    endpoint.refresh_from_db()
    assert (endpoint.price_per_1m_input, endpoint.price_per_1m_output) == (Decimal("2.5"), Decimal("10"))
    assert endpoint.options == {"seed": 3}

    other = services.endpoint_create(name="S", backend="random", price_per_1m_output=Decimal("0.4"))
    other.refresh_from_db()
    assert (other.price_per_1m_input, other.price_per_1m_output) == (None, Decimal("0.4"))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"options": {"price_per_1m_input": -1}},
            "price_per_1m_input must be a number of USD per million tokens, 0 or more, got -1",
        ),
        (
            {"options": {"price_per_1m_output": "cheap"}},
            "price_per_1m_output must be a number of USD per million tokens, got 'cheap'",
        ),
        ({"price_per_1m_input": True}, "price_per_1m_input must be a number of USD per million tokens, got True"),
        ({"options": {"price_per_1m_input": "NaN"}}, "0 or more, got 'NaN'"),
        (
            {"price_per_1m_input": 1, "options": {"price_per_1m_input": 1}},
            "price_per_1m_input is given twice: as the endpoint's price and among its options",
        ),
    ],
)
def test_a_price_that_is_not_a_non_negative_number_is_refused_naming_it(given, message):
    with pytest.raises(ValidationError) as refused:
        services.endpoint_create(name="R", backend="random", **given)
    assert message in " ".join(refused.value.messages)
    assert ModelEndpoint.objects.count() == 0


@pytest.mark.django_db
def test_the_admin_form_takes_prices_in_their_fields_and_refuses_them_among_the_options():
    data = {"name": "J", "backend": "random", "concurrency": 4, "options": "{}"}
    form = EndpointForm(data={**data, "price_per_1m_input": "3", "price_per_1m_output": "-2"})
    assert not form.is_valid()
    assert form.errors["price_per_1m_output"] == ["Ensure this value is greater than or equal to 0."]

    form = EndpointForm(data={**data, "options": json.dumps({"price_per_1m_input": 3})})
    assert not form.is_valid()
    assert "the price is a field of the endpoint of its own" in form.errors["options"][0]

    form = EndpointForm(data={**data, "price_per_1m_input": "3", "price_per_1m_output": "12.5"})
    assert form.is_valid(), form.errors
    endpoint = form.save()
    assert (endpoint.price_per_1m_input, endpoint.price_per_1m_output) == (Decimal("3"), Decimal("12.5"))


@pytest.mark.django_db
def test_the_migration_moves_numeric_price_options_into_the_fields_and_back():
    migration = importlib.import_module("inference.migrations.0010_endpoint_prices_job_correct_answers")
    numeric = ModelEndpoint.objects.create(
        name="a", backend="random", options={"seed": 1, "price_per_1m_input": 2.5, "price_per_1m_output": "8"}
    )
    odd = ModelEndpoint.objects.create(name="b", backend="random", options={"price_per_1m_input": "free"})
    none = ModelEndpoint.objects.create(name="c", backend="random", options={"seed": 2})

    migration.options_to_fields(apps, None)
    numeric.refresh_from_db(), odd.refresh_from_db(), none.refresh_from_db()
    assert (numeric.price_per_1m_input, numeric.price_per_1m_output, numeric.options) == (
        Decimal("2.5"),
        Decimal("8"),
        {"seed": 1},
    )
    assert (odd.price_per_1m_input, odd.options) == (None, {"price_per_1m_input": "free"})
    assert (none.price_per_1m_input, none.options) == (None, {"seed": 2})

    migration.fields_to_options(apps, None)
    numeric.refresh_from_db()
    assert numeric.options == {"seed": 1, "price_per_1m_input": 2.5, "price_per_1m_output": 8.0}


def test_costs_are_shown_to_the_micro_dollar_with_at_least_cents():
    assert [selectors.usd(v) for v in (None, 0.0, 1.0, 0.075, 0.001234, 12.5, 0.0000004, 1234.5678904)] == [
        "–",
        "$0.00",
        "$1.00",
        "$0.075",
        "$0.001234",
        "$12.50",
        "$0.00",
        "$1234.56789",
    ]


def test_cost_per_correct_needs_a_cost_and_a_correct_answer():
    assert job_cost_per_correct(0.3, 4) == 0.075
    assert job_cost_per_correct(0.0, 4) == 0.0
    assert job_cost_per_correct(None, 4) is None
    assert job_cost_per_correct(0.3, None) is None
    assert job_cost_per_correct(0.3, 0) is None
    assert metrics_correct({"correct": 7}) == 7
    assert [metrics_correct(m) for m in (None, {}, {"correct": True}, {"correct": -1}, {"correct": 2.0})] == [None] * 5


# --- a job's tokens, cost and cost per correct answer ----------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_job_counts_the_tokens_usage_reports_its_cost_and_its_cost_per_correct_answer(
    eager, make_project, tmp_path, settings
):
    settings.STATELAB_JOB_METRICS = SCORER
    standin = StandIn(faults=False).start()
    try:
        project = make_project("vt", "visualtrans")
        items = factories.visualtrans_items(project, 12, tmp_path)
        release = factories.release_of(project, items)
        endpoint = _judge(standin, price_per_1m_input="2", price_per_1m_output="8")

        job = services.job_create(endpoint=endpoint, project=project, release=release, params={"chunk_size": 5})
        job.refresh_from_db()
        assert job.status == JobStatus.FINISHED and standin.received == 12

        # The tokens are what the server's usage said, request by request.
        sent = [e["usage"] for e in standin.events]
        assert (job.prompt_tokens, job.completion_tokens) == (sum(u[0] for u in sent), sum(u[1] for u in sent))
        preds = list(Prediction.objects.filter(job=job))
        assert sorted((p.prompt_tokens, p.completion_tokens) for p in preds) == sorted(sent)
        assert job.prompt_tokens > 0 and job.completion_tokens > 0
        cost = (job.prompt_tokens * 2 + job.completion_tokens * 8) / 1e6
        assert selectors.job_cost(job) == round(cost, 6)

        # Scored when its results were written: the answers that name the release's right option.
        right = {it.key: it.resolved["qa"]["answer"] for it in job_items(project=project, release=release)}
        correct = sum(1 for p in preds if p.status == PredictionStatus.OK and p.answer == right[p.item_id])
        assert 0 < correct < 12  # the stand-in's letters are not all right, nor all wrong
        assert job.correct_answers == correct
        progress = selectors.job_progress(job=job)
        assert (progress["cost_usd"], progress["correct_answers"], progress["cached_answers"]) == (
            round(cost, 6),
            correct,
            0,
        )
        assert progress["cost_per_correct_usd"] == round(round(cost, 6) / correct, 6)
        results = json.loads((services.job_export_dir(job) / "results.json").read_text())
        assert results["usage"]["cost_per_correct_usd"] == progress["cost_per_correct_usd"]
        assert results["usage"]["correct_answers"] == correct and results["metrics"]["correct"] == correct

        # The same job again: every answer from the response cache, no token, no cost; the same score.
        again = services.job_create(endpoint=endpoint, project=project, release=release, params={"chunk_size": 5})
        again.refresh_from_db()
        assert standin.received == 12
        assert (again.cached_answers, again.prompt_tokens, again.completion_tokens) == (12, 0, 0)
        assert selectors.job_cost(again) == 0.0
        assert again.correct_answers == correct
        assert selectors.job_progress(job=again)["cost_per_correct_usd"] == 0.0
    finally:
        standin.stop()


SEEN_AT_SCORING: list[int | None] = []


def recording_scorer(job):
    """metrics_with_correct, noting the count the job held when it was scored again."""
    SEEN_AT_SCORING.append(InferenceJob.objects.get(pk=job.pk).correct_answers)
    return metrics_with_correct(job)


@pytest.mark.django_db(transaction=True)
def test_retry_forgets_the_score_until_the_job_is_scored_again(eager, make_project, tmp_path, settings):
    settings.STATELAB_JOB_METRICS = SCORER
    standin = StandIn(faults=False).start()
    try:
        project = make_project("vt", "visualtrans")
        items = factories.visualtrans_items(project, 4, tmp_path)
        job = services.job_create(
            endpoint=_judge(standin, price_per_1m_input="1"),
            project=project,
            release=factories.release_of(project, items),
        )
        job.refresh_from_db()
        scored = job.correct_answers
        assert scored is not None
        # One query failed: a retry asks it again, and the job's count is forgotten until its
        # results are written (and it is scored) again.
        first = Prediction.objects.filter(job=job).order_by("pk")[0]
        Prediction.objects.filter(pk=first.pk).update(status=PredictionStatus.FAILED, answer=None, raw_output="")
        InferenceJob.objects.filter(pk=job.pk).update(done_queries=3, failed_queries=1)
        settings.STATELAB_JOB_METRICS = "tests.inference.test_job_cost.recording_scorer"
        SEEN_AT_SCORING.clear()
        assert services.job_retry_failed(job=InferenceJob.objects.get(pk=job.pk)) == 1
        job.refresh_from_db()
        assert SEEN_AT_SCORING == [None]
        assert job.status == JobStatus.FINISHED and job.correct_answers == scored
    finally:
        standin.stop()


@pytest.mark.django_db
def test_a_job_without_prices_or_score_shows_no_cost_per_correct(eager, client, make_user, make_project, tmp_path):
    from annotation.models import Membership, Role

    project = make_project("st", "status")
    items = factories.status_items(project, 2, tmp_path)
    endpoint = services.endpoint_create(name="R", backend="random")
    job = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items))
    researcher = make_user("res")
    Membership.objects.create(project=project, user=researcher, role=Role.RESEARCHER)
    client.force_login(researcher)

    InferenceJob.objects.filter(pk=job.pk).update(correct_answers=None)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<span id="job-cost">–</span>' in page
    assert '<span id="job-cost-per-correct">– (not scored)</span>' in page
    assert '<span id="job-cached" hidden>' in page

    InferenceJob.objects.filter(pk=job.pk).update(correct_answers=5)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<span id="job-cost-per-correct">– (no price)</span>' in page

    ModelEndpoint.objects.filter(pk=endpoint.pk).update(price_per_1m_input=Decimal("1000"))
    InferenceJob.objects.filter(pk=job.pk).update(prompt_tokens=1000, cached_answers=1204, correct_answers=0)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<span id="job-cost">$1.00</span>' in page
    assert '<span id="job-cost-per-correct">– (none correct)</span>' in page
    assert "1,204 answers from cache (no cost)" in page

    InferenceJob.objects.filter(pk=job.pk).update(correct_answers=4)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<span id="job-cost-per-correct">$0.25 (4 correct)</span>' in page
    api = client.get(f"/api/jobs/{job.pk}/progress/").json()
    assert (api["cost_usd"], api["cost_per_correct_usd"], api["correct_answers"], api["cached_answers"]) == (
        1.0,
        0.25,
        4,
        1204,
    )
