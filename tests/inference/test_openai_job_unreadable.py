"""Unreadable judge replies as a researcher sees them, against the local stand-in
(tests/inference/openai_standin.py) with eager Celery: the job's progress API, its page and the
admin list show them apart from the failed requests, each with its reason, tries, repairs and reply;
"retry failed" asks the judge again for both, stores a reply that stays unreadable anew and leaves
the readable ones untouched, and once the judge recovers every reply that came back is read and
scored."""

import json

import pytest

from inference import services
from inference.models import JobStatus, Prediction, PredictionStatus
from protocols.oscbench.prompts import JUDGE_SCHEMA
from tests.helpers.standin_jobs import judge_run as _judge_run

from .openai_standin import four_judge_outcomes, schema_reply

pytestmark = pytest.mark.django_db(transaction=True)


def _researcher(make_user, project):
    from django.contrib.auth.models import Permission

    from annotation.models import Membership, Role

    user = make_user("res")
    user.is_staff = True
    user.save()
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="inference"))
    Membership.objects.create(project=project, user=user, role=Role.RESEARCHER)
    return user


def test_unreadable_judge_replies_are_listed_apart_from_failures_and_retry_asks_the_judge_again(
    eager, standin, make_project, make_user, client, tmp_path
):
    standin.rule = four_judge_outcomes
    job, items, preds, requests, item_of = _judge_run(standin, make_project, tmp_path, 12)
    fault = {item_of[key]: four_judge_outcomes(key) for key in requests}  # by item id
    key_of = {item: key for key, item in item_of.items()}
    assert set(fault.values()) == {"alwaysbadjson", "badjson_then500", "always500", None}
    stays_bad = sorted(i for i, f in fault.items() if f == "alwaysbadjson")
    repair_fails = sorted(i for i, f in fault.items() if f == "badjson_then500")
    hopeless = sorted(i for i, f in fault.items() if f == "always500")
    unreadable = sorted(stays_bad + repair_fails)
    reason = {i: "judge reply not valid JSON after 2 repairs" for i in stays_bad} | {
        i: "judge reply not valid JSON after 1 repair; the last repair request failed: HTTP 500: internal error "
        "(after 3 attempts)"
        for i in repair_fails
    }
    assert all(
        (preds[i].status, preds[i].answer, preds[i].error) == (PredictionStatus.OK, None, reason[i]) for i in unreadable
    )

    # The job API's summary: the failed requests, and apart from them the unreadable replies
    # (counted in done: a reply came back), each with its reason, requests, repairs and reply.
    client.force_login(_researcher(make_user, job.project))
    progress = client.get(f"/api/jobs/{job.pk}/progress/").json()
    assert (progress["total"], progress["done"], progress["failed"], progress["unreadable"]) == (
        12,
        12 - len(hopeless),
        len(hopeless),
        len(unreadable),
    )
    assert [f["item"] for f in progress["failures"]] == hopeless
    assert progress["unreadable_replies"] == [
        {
            "item": i,
            "query": "judge",
            "reason": reason[i],
            "attempts": preds[i].attempts,
            "json_repairs": preds[i].json_repairs,
            "reply": schema_reply(JUDGE_SCHEMA, key_of[i], malformed=True),
        }
        for i in unreadable
    ]
    assert [(u["attempts"], u["json_repairs"]) for u in progress["unreadable_replies"]] == [
        (3, 2) if i in stays_bad else (4, 1) for i in unreadable
    ]
    # The job page lists them under their own heading, and the admin list counts them.
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'Failed queries (<span id="job-failed-count">{len(hopeless)}</span>)' in page
    assert f'Unreadable replies (<span id="job-unreadable-count">{len(unreadable)}</span>)' in page
    for i in unreadable:
        p = preds[i]
        assert (
            f"<tr><td>{i}</td><td>judge</td><td>{p.attempts}</td><td>{p.json_repairs}</td><td>{reason[i]}</td>" in page
        )
    assert '<p id="job-unreadable-more" class="muted" hidden>' in page  # every one is shown
    listing = client.get("/admin/inference/inferencejob/").content.decode()
    assert (
        f'<a class="job-live" data-job="{job.pk}" data-field="unreadable" href="/jobs/{job.pk}/#job-unreadable" '
        f'title="replies that stayed unreadable JSON after their repairs: scored as missing">'
        f"{len(unreadable)} unreadable</a>"
    ) in listing
    folder = services.job_export_dir(job)
    results = json.loads((folder / "results.json").read_text())
    assert (results["counts"]["failed"], results["counts"]["parse_failures"]) == (len(hopeless), len(unreadable))

    # Retry while the judge still misbehaves: the failed queries and the unreadable replies are
    # asked again, once each (then repaired as any reply); the clean replies are not touched. A
    # reply that stays unreadable is stored anew with its reason; a repair-failing one now fails
    # outright (its first request is a 500 now). Either way still missing: the scores do not move.
    readable = {p.pk: p.updated_at for p in preds.values() if p.answer is not None}
    tokens_before = (job.prompt_tokens, job.completion_tokens)
    asked_before = {key: len(outcomes) for key, outcomes in standin.outcomes().items()}
    assert client.post(f"/api/jobs/{job.pk}/retry-failed/").json() == {"items": len(hopeless) + len(unreadable)}
    outcomes = standin.outcomes()
    for item, f in fault.items():
        new = outcomes[key_of[item]][asked_before[key_of[item]] :]
        assert (
            new
            == {"alwaysbadjson": ["badjson"] * 3, "badjson_then500": ["500"] * 3, "always500": ["500"] * 3, None: []}[f]
        ), (item, f, new)
    job.refresh_from_db()
    after = {p.item.external_id: p for p in Prediction.objects.filter(job=job).select_related("item")}
    assert (job.status, job.done_queries, job.failed_queries) == (
        JobStatus.FINISHED,
        12 - len(hopeless) - len(repair_fails),
        len(hopeless) + len(repair_fails),
    )
    for i in stays_bad:
        assert (after[i].status, after[i].answer, after[i].error, after[i].attempts, after[i].json_repairs) == (
            PredictionStatus.OK,
            None,
            "judge reply not valid JSON after 2 repairs",
            3,
            2,
        )
    for i in repair_fails:
        assert (after[i].status, after[i].answer, after[i].error, after[i].attempts, after[i].json_repairs) == (
            PredictionStatus.FAILED,
            None,
            "HTTP 500: internal error (after 3 attempts)",
            3,
            0,
        )
    assert {p.pk: p.updated_at for p in after.values() if p.answer is not None} == readable
    # The job's tokens count what was spent: the replaced replies' tokens stay in them.
    retried = [after[i] for i in unreadable + hopeless]
    assert (job.prompt_tokens, job.completion_tokens) == (
        tokens_before[0] + sum(p.prompt_tokens for p in retried),
        tokens_before[1] + sum(p.completion_tokens for p in retried),
    )
    progress = client.get(f"/api/jobs/{job.pk}/progress/").json()
    assert (progress["failed"], progress["unreadable"]) == (len(hopeless) + len(repair_fails), len(stays_bad))
    assert [u["item"] for u in progress["unreadable_replies"]] == stays_bad
    assert [f["item"] for f in progress["failures"]] == sorted(hopeless + repair_fails)
    retried_results = json.loads((folder / "results.json").read_text())
    assert retried_results["metrics"] == results["metrics"]

    # The judge recovers: a second retry reads every reply that came back; only the requests that
    # always fail are still failed.
    standin.rule = lambda key: "always500" if four_judge_outcomes(key) == "always500" else None
    asked_before = {key: len(outcomes) for key, outcomes in standin.outcomes().items()}
    assert client.post(f"/api/jobs/{job.pk}/retry-failed/").json() == {"items": len(hopeless) + len(unreadable)}
    outcomes = standin.outcomes()
    for i in unreadable:
        assert outcomes[key_of[i]][asked_before[key_of[i]] :] == ["ok"]
    job.refresh_from_db()
    after = {p.item.external_id: p for p in Prediction.objects.filter(job=job).select_related("item")}
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 12 - len(hopeless), len(hopeless))
    for i in unreadable:
        whole = schema_reply(JUDGE_SCHEMA, key_of[i])
        assert (
            after[i].status,
            after[i].answer,
            after[i].error,
            after[i].attempts,
            after[i].json_repairs,
            after[i].raw_output,
        ) == (PredictionStatus.OK, json.loads(whole)["scores"], "", 1, 0, whole)
    progress = client.get(f"/api/jobs/{job.pk}/progress/").json()
    assert (progress["failed"], progress["unreadable"], progress["unreadable_replies"]) == (len(hopeless), 0, [])
    assert '<td colspan="6">No unreadable replies.</td>' in client.get(f"/jobs/{job.pk}/").content.decode()
    recovered = json.loads((folder / "results.json").read_text())
    assert (recovered["counts"]["failed"], recovered["counts"]["parse_failures"]) == (len(hopeless), 0)
    generators = recovered["metrics"]["generators"]
    assert sum(g["n"] - g["parse_failures"] for g in generators) == 12 - len(hopeless)
