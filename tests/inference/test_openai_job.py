"""The openai backend end to end: real HTTP to a local stand-in, the real openai client, eager Celery."""

import json
from collections import Counter

import pytest

from inference import selectors, services
from inference.models import InferenceJob, JobStatus, Prediction, PredictionStatus
from protocols.oscbench.prompts import JUDGE_SCHEMA

from . import factories
from .openai_standin import four_judge_outcomes, planned_fault, schema_reply, unrepairable_json_fault

pytestmark = pytest.mark.django_db(transaction=True)

# The judge's timeout in these tests. It bounds every phase of a request, opening the connection
# included, so a pause of this process longer than it makes a query the stand-in would answer at
# once time out and be retried; when the pause lands while a connection opens, that try counts
# although no request went out. Garbage collection and a loaded machine pause the process for
# 0.5 s and more (a clean-clone CI run: two clean queries with 2 attempts at a 0.5 s timeout; a
# 1.2 s collection seen on a busy 2-core machine), hence the margin. The stand-in's planned hang
# (timeout_sleep, 10 s) outlasts it.
TIMEOUT = 3.0


def _endpoint(standin, **options):
    return services.endpoint_create(
        name="standin-judge",
        backend="openai",
        model_id="standin-1",
        base_url=standin.base_url,
        concurrency=16,
        options={
            "timeout": TIMEOUT,
            "max_retries": 2,
            "price_per_1m_input": 2.0,
            "price_per_1m_output": 8.0,
            **options,
        },
    )


def test_job_of_200_items_stores_each_prediction_once_recovers_retries_and_records_failures(
    eager, standin, make_project, make_user, tmp_path
):
    # Longer than the client's own first backoff (0.375-0.5 s): a wait this long shows the
    # client read the header.
    standin.retry_after = 1.0
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 200, tmp_path)
    release = factories.release_of(project, items)
    endpoint = _endpoint(standin)

    job = services.job_create(endpoint=endpoint, project=project, release=release, params={"chunk_size": 25})

    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    assert job.total_queries == 200
    preds = list(Prediction.objects.filter(job=job))
    assert len(preds) == 200
    assert len({(p.item_id, p.query) for p in preds}) == 200

    outcomes = standin.outcomes()  # key -> what the server did with each request of that query
    assert len(outcomes) == 200
    faults = {key: planned_fault(key) for key in outcomes}
    # The rule gives every kind of fault somewhere in these 200 queries.
    assert {"429", "500", "timeout", "always500", "badjson", "badbody", "alwaysbadbody"} <= set(faults.values())
    hopeless = {k for k, f in faults.items() if f in ("always500", "alwaysbadbody")}
    recovered = {k for k, f in faults.items() if f in ("429", "500", "timeout", "badbody")}
    unreadable = {k for k, f in faults.items() if f == "badjson"}  # a letter was asked, cut JSON came back
    for key in hopeless:
        expected = "500" if faults[key] == "always500" else "badbody"
        assert outcomes[key] == [expected] * 3  # 1 try + max_retries=2, then given up
    for key in recovered:
        assert outcomes[key] == [faults[key], "ok"]
    for key in unreadable:
        assert outcomes[key] == ["badjson"]  # a well-formed reply: nothing to retry
    for key in set(outcomes) - hopeless - recovered - unreadable:
        assert outcomes[key] == ["ok"]

    # retry-after is honoured: the second request of a rate-limited query came at least the
    # advertised delay after the 429 went out.
    by_key: dict[str, list[dict]] = {}
    for event in standin.events:
        by_key.setdefault(event["key"], []).append(event)
    limited = [k for k, f in faults.items() if f == "429"]
    assert limited
    for key in limited:
        first, second = sorted(by_key[key], key=lambda e: e["attempt"])
        assert first["outcome"] == "429"
        assert second["received"] - first["replied"] >= 0.95 * standin.retry_after, (
            key,
            second["received"] - first["replied"],
        )

    failed = [p for p in preds if p.status == PredictionStatus.FAILED]
    assert len(failed) == len(hopeless)
    assert job.failed_queries == len(hopeless)
    assert job.done_queries == 200 - len(hopeless)
    for p in failed:
        assert p.error == "HTTP 500: internal error (after 3 attempts)" or p.error.startswith(
            "bad response: the body is not JSON: '<html><body>502 Bad Gateway"
        )
        assert p.error.endswith("(after 3 attempts)") and p.attempts == 3
        assert p.answer is None and p.raw_output == ""
    assert sum(p.error.startswith("bad response: the body is not JSON") for p in failed) == sum(
        faults[k] == "alwaysbadbody" for k in hopeless
    )

    ok = [p for p in preds if p.status == PredictionStatus.OK]
    parsed = [p for p in ok if p.answer is not None]
    garbled = [p for p in ok if p.answer is None]
    assert len(garbled) == len(unreadable)
    assert all(p.raw_output.startswith('{"answer": "') for p in garbled)  # stored as given, never guessed
    assert all(p.answer in ("A", "B", "C", "D") and p.answer == p.raw_output for p in parsed)
    assert all(
        set(p.logprobs) == {"A", "B", "C", "D"} and max(p.logprobs, key=p.logprobs.get) == p.answer for p in parsed
    )
    # The client's own count is exact too: 1 try for a clean or unreadable reply, 2 for a recovered
    # one (its one fault, then "ok"). A try counts even when its request never went out (a
    # connection that timed out), so this also shows that no try was lost before the stand-in.
    assert Counter(p.attempts for p in ok) == {1: len(ok) - len(recovered), 2: len(recovered)}
    # Token usage adds up and the cost follows the endpoint's prices.
    assert job.prompt_tokens == sum(p.prompt_tokens for p in preds)
    assert job.completion_tokens == sum(p.completion_tokens for p in preds)
    # The stored prompt is the rendered one, images as placeholders, and has no data URL.
    assert parsed[0].prompt.startswith(
        "[user]\nImage 1 (initial state):\n<image 1>\nImage 2 (final state):\n<image 2>\n"
    )
    assert "base64" not in parsed[0].prompt
    # The export counts the unreadable replies as parse failures and the hopeless ones as failed.
    results = json.loads((services.job_export_dir(job) / "results.json").read_text())
    assert (results["counts"]["ok"], results["counts"]["failed"], results["counts"]["parse_failures"]) == (
        len(ok),
        len(hopeless),
        len(unreadable),
    )


def test_rerunning_a_finished_job_writes_nothing_and_retry_failed_only_reruns_failures(
    eager, standin, make_project, tmp_path
):
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 60, tmp_path)
    job = services.job_create(
        endpoint=_endpoint(standin), project=project, release=factories.release_of(project, items)
    )
    job.refresh_from_db()
    failed_before = job.failed_queries
    assert failed_before >= 1 and job.done_queries + failed_before == 60
    requests_before = len(standin.log)
    stamps = dict(Prediction.objects.filter(job=job, status="ok").values_list("id", "updated_at"))

    # A chunk delivered twice finds every query OK or failed-and-not-its-turn: nothing new is asked.
    assert services.job_run_chunk(job_id=job.pk, item_ids=[i.pk for i in items[:20]]) == 0

    # Retry: only the failed items are asked again (they fail again: the rule says always 500).
    assert services.job_retry_failed(job=job) == failed_before
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    assert len(standin.log) - requests_before == 3 * failed_before
    assert Prediction.objects.filter(job=job).count() == 60
    assert job.failed_queries == failed_before and job.done_queries == 60 - failed_before
    assert dict(Prediction.objects.filter(job=job, status="ok").values_list("id", "updated_at")) == stamps


def _judge_run(standin, make_project, tmp_path, n: int):
    """A finished OSCBench judge job over n items (4 frames each) against the stand-in: the job,
    its items, its predictions by item id, the stand-in's requests per key (in order) and the item
    each key is (a key is one item's judge query, whose first user message quotes the item's prompt)."""
    project = make_project("osc", "oscbench", settings={"rubric": {"object": "Is it bread?"}})
    items = factories.oscbench_items(project, n, tmp_path)
    job = services.job_create(
        endpoint=_endpoint(standin), project=project, release=factories.release_of(project, items), params={"frames": 4}
    )
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    preds = {p.item.external_id: p for p in Prediction.objects.filter(job=job).select_related("item")}
    assert len(preds) == n
    requests: dict[str, list[dict]] = {}
    for event in sorted(standin.events, key=lambda e: (e["key"], e["attempt"])):
        requests.setdefault(event["key"], []).append(event)
    item_of = {}
    for key, asked in requests.items():
        [item_of[key]] = [i.external_id for i in items if f'"{i.payload["prompt"]}"' in asked[0]["text"]]
    assert sorted(item_of.values()) == sorted(preds)
    return job, items, preds, requests, item_of


def test_judge_json_is_repaired_by_asking_again(eager, standin, make_project, tmp_path):
    job, items, preds, requests, item_of = _judge_run(standin, make_project, tmp_path, 40)
    outcomes = standin.outcomes()
    faults = {key: planned_fault(key) for key in requests}
    bad = {key for key, fault in faults.items() if fault == "badjson"}
    assert bad, "the rule puts at least one malformed reply in 40 judge queries"

    criteria = {"subject", "object", "action", "osc_accuracy", "osc_consistency", "scene", "realism", "aesthetics"}
    repair_turns = [("user", services.JSON_REPAIR_PROMPT)]
    for key, fault in faults.items():
        p = preds[item_of[key]]
        asked = requests[key]
        first_prompt = "[user]\n" + "\n".join(f"<image {n}>" for n in range(1, 5)) + "\n" + asked[0]["text"]
        reply = schema_reply(JUDGE_SCHEMA, key)
        if fault == "badjson":
            # Half an object came back; exactly one repair request followed, carrying that reply,
            # and its answer is what is stored: the judge's values, with the whole conversation.
            cut = schema_reply(JUDGE_SCHEMA, key, malformed=True)
            assert outcomes[key] == ["badjson", "ok"], (p.item.external_id, outcomes[key])
            assert [e["follow_up"] for e in asked] == [[], [("assistant", cut)] + repair_turns]
            assert (p.status, p.error, p.attempts, p.json_repairs, p.raw_output) == (
                PredictionStatus.OK,
                "",
                2,
                1,
                reply,
            )
            assert p.answer == json.loads(reply)["scores"] and set(p.answer) == criteria
            assert p.prompt == f"{first_prompt}\n\n[assistant]\n{cut}\n\n[user]\n{services.JSON_REPAIR_PROMPT}"
            continue
        assert [e["follow_up"] for e in asked] == [[]] * len(asked)  # readable JSON or no reply: no repair
        assert p.prompt == first_prompt and p.json_repairs == 0
        if fault == "always500":  # missing, with the reason
            assert outcomes[key] == ["500"] * 3
            assert (p.status, p.error, p.attempts, p.answer, p.raw_output) == (
                PredictionStatus.FAILED,
                "HTTP 500: internal error (after 3 attempts)",
                3,
                None,
                "",
            )
            continue
        if fault == "alwaysbadbody":
            assert outcomes[key] == ["badbody"] * 3
            assert (p.status, p.attempts, p.answer, p.raw_output) == (PredictionStatus.FAILED, 3, None, "")
            assert p.error.startswith("bad response: the body is not JSON: '<html><body>502 Bad Gateway")
            continue
        assert outcomes[key] == ([fault, "ok"] if fault else ["ok"]), (p.item.external_id, outcomes[key])
        assert (p.status, p.error, p.attempts, p.raw_output) == (PredictionStatus.OK, "", 2 if fault else 1, reply)
        assert p.answer == json.loads(reply)["scores"] and set(p.answer) == criteria
    for p in preds.values():
        assert p.frame_indices == {"video": [1, 3, 6, 8]}
        assert "- object: Is it bread?" in p.prompt and p.prompt.count("<image") == 4
        if p.status == PredictionStatus.OK:
            assert json.loads(p.raw_output)["evidence"]
    # results.json carries the judge's scores per generator (not null): the evaluation app's scoring.
    from evaluation.scoring import answer_sets

    metrics = json.loads((services.job_export_dir(job) / "results.json").read_text())["metrics"]
    assert metrics["judge"] == "standin-judge"
    assert [g["generator"] for g in metrics["generators"]] == ["gen0", "gen1", "gen2"]
    assert [g["n"] for g in metrics["generators"]] == [14, 13, 13]
    failed_judge = sum(p.status == PredictionStatus.FAILED for p in preds.values())
    assert sum(g["parse_failures"] for g in metrics["generators"]) == failed_judge
    for g in metrics["generators"]:
        assert set(g["metrics"]) == set(answer_sets.main_keys("oscbench"))
        assert all(v is None or 0 <= v <= 1 for v in g["metrics"].values())
        assert g["metrics"]["osc_accuracy"] is not None


def test_a_judge_reply_no_repair_makes_readable_is_missing_with_its_reason_and_every_request_counted(
    eager, standin, make_project, tmp_path
):
    # Two faults no repair recovers: a judge that keeps cutting its JSON short, and one whose repair
    # request fails (500 on the request and on both of the client's retries of it).
    standin.rule = unrepairable_json_fault
    job, items, preds, requests, item_of = _judge_run(standin, make_project, tmp_path, 90)
    outcomes = standin.outcomes()
    faults = {key: unrepairable_json_fault(key) for key in requests}
    assert {"badjson", "alwaysbadjson", "badjson_then500", "always500"} <= set(faults.values())

    turns = [("user", services.JSON_REPAIR_PROMPT)]
    for key, fault in faults.items():
        p = preds[item_of[key]]
        asked = requests[key]
        # Every request of the query is in the stored figures, repair requests included, failed or
        # not: its tries, and the tokens of every reply that came back.
        assert p.attempts == len(outcomes[key]), (p.item.external_id, fault)
        answered = [e for e in asked if "usage" in e and e["outcome"] != "timeout"]  # a timed-out reply was never read
        assert (p.prompt_tokens, p.completion_tokens) == (
            sum(e["usage"][0] for e in answered),
            sum(e["usage"][1] for e in answered),
        ), (p.item.external_id, fault)
        first_prompt = "[user]\n" + "\n".join(f"<image {n}>" for n in range(1, 5)) + "\n" + asked[0]["text"]
        cut = schema_reply(JUDGE_SCHEMA, key, malformed=True)
        repair = f"\n\n[assistant]\n{cut}\n\n[user]\n{services.JSON_REPAIR_PROMPT}"
        if fault == "alwaysbadjson":
            # Two repair rounds (json_retries' default), each carrying the conversation so far; the
            # last cut reply is stored as given, with no answer and the reason.
            assert outcomes[key] == ["badjson"] * 3
            assert [e["follow_up"] for e in asked] == [
                [],
                [("assistant", cut)] + turns,
                ([("assistant", cut)] + turns) * 2,
            ]
            assert (p.status, p.answer, p.raw_output, p.attempts, p.json_repairs, p.error) == (
                PredictionStatus.OK,
                None,
                cut,
                3,
                2,
                "judge reply not valid JSON after 2 repairs",
            )
            assert p.prompt == first_prompt + repair * 2
        elif fault == "badjson_then500":
            # The repair request failed after the client's retries: no second round; the unreadable
            # first reply is stored with the prompt that produced it, and the reason says both.
            assert outcomes[key] == ["badjson", "500", "500", "500"]
            assert [e["follow_up"] for e in asked] == [[]] + [[("assistant", cut)] + turns] * 3
            assert (p.status, p.answer, p.raw_output, p.attempts, p.json_repairs, p.error) == (
                PredictionStatus.OK,
                None,
                cut,
                4,
                1,
                "judge reply not valid JSON after 1 repair; the last repair request failed: "
                "HTTP 500: internal error (after 3 attempts)",
            )
            assert p.prompt == first_prompt
        elif fault == "badjson":
            assert outcomes[key] == ["badjson", "ok"]
            assert (p.status, p.raw_output, p.attempts, p.json_repairs, p.error) == (
                PredictionStatus.OK,
                schema_reply(JUDGE_SCHEMA, key),
                2,
                1,
                "",
            )
            assert p.prompt == first_prompt + repair
        else:
            assert p.json_repairs == 0 and p.prompt == first_prompt
            assert (p.error == "") == (p.status == PredictionStatus.OK)
            assert (p.answer is not None) == (p.status == PredictionStatus.OK)

    unreadable = [p for p in preds.values() if p.status == PredictionStatus.OK and p.answer is None]
    failed = [p for p in preds.values() if p.status == PredictionStatus.FAILED]
    assert len(unreadable) == sum(f in ("alwaysbadjson", "badjson_then500") for f in faults.values())
    assert len(failed) == sum(f in ("always500", "alwaysbadbody") for f in faults.values())
    assert (job.done_queries, job.failed_queries) == (90 - len(failed), len(failed))
    assert (job.prompt_tokens, job.completion_tokens) == (
        sum(p.prompt_tokens for p in preds.values()),
        sum(p.completion_tokens for p in preds.values()),
    )

    # Scored as missing, as docs/protocols/oscbench.md says: a parse failure, in no mean. Each generator's score
    # is the mean over its readable answers only.
    folder = services.job_export_dir(job)
    results = json.loads((folder / "results.json").read_text())
    assert (results["counts"]["ok"], results["counts"]["failed"], results["counts"]["parse_failures"]) == (
        90 - len(failed),
        len(failed),
        len(unreadable),
    )
    generator_of = {i.external_id: i.payload["generator"] for i in items}
    for g in results["metrics"]["generators"]:
        mine = [p for p in preds.values() if generator_of[p.item.external_id] == g["generator"]]
        read = [p.answer for p in mine if p.answer is not None]
        assert (g["n"], g["parse_failures"]) == (len(mine), len(mine) - len(read))
        for criterion in ("object", "osc_accuracy", "realism"):
            values = [a[criterion] for a in read if a[criterion] is not None]
            assert g["metrics"][criterion] == pytest.approx(sum(v - 1 for v in values) / (4 * len(values)), abs=5e-4)
    samples = {s["item"]: s for s in map(json.loads, (folder / "samples.jsonl").read_text().splitlines())}
    for p in unreadable:
        line = samples[p.item.external_id]
        assert (line["status"], line["answer"], line["error"], line["json_repairs"]) == (
            "ok",
            None,
            p.error,
            p.json_repairs,
        )

    # A re-score keeps the reason in step with the stored reply. One that now reads (here: the
    # reply made whole) drops it with the gap; one that no longer reads (here: a repaired reply
    # cut short) gets it, with the repairs its chunk made; an unreadable one whose reason was
    # lost (as a re-score before this rule left it) gets it back; the others keep theirs, a
    # failed repair request's included. Statuses and counters do not move.
    key_of = {item: key for key, item in item_of.items()}
    mended, lost = unreadable[:2]
    whole = schema_reply(JUDGE_SCHEMA, key_of[mended.item.external_id])
    Prediction.objects.filter(pk=mended.pk).update(raw_output=whole)
    [broken] = [p for p in preds.values() if faults[key_of[p.item.external_id]] == "badjson"][:1]
    Prediction.objects.filter(pk=broken.pk).update(raw_output=broken.raw_output[:40])
    Prediction.objects.filter(pk=lost.pk).update(error="")
    assert services.job_rescore(job=job) == 3
    for p in (mended, broken, lost):
        p.refresh_from_db()
    assert (mended.answer, mended.error) == (json.loads(whole)["scores"], "")
    assert (broken.status, broken.answer, broken.json_repairs, broken.error) == (
        PredictionStatus.OK,
        None,
        1,
        "judge reply not valid JSON after 1 repair",
    )
    assert (lost.answer, lost.error) == (
        None,
        "judge reply not valid JSON after 2 repairs"
        if faults[key_of[lost.item.external_id]] == "alwaysbadjson"
        else "judge reply not valid JSON after 1 repair",
    )
    now_unreadable = [p for p in unreadable if p.pk != mended.pk] + [broken]
    assert {p.pk: p.error for p in selectors.unreadable_replies(job)} == {
        p.pk: broken.error if p.pk == broken.pk else (lost.error if p.pk == lost.pk else p.error)
        for p in now_unreadable
    }
    count, shown = selectors.job_unreadable(job=job)
    assert count == len(now_unreadable) and {u["item"] for u in shown} == {p.item.external_id for p in now_unreadable}
    job.refresh_from_db()
    assert (job.done_queries, job.failed_queries) == (90 - len(failed), len(failed))
    # The re-score rewrote the exports: the samples carry the reasons as they are now.
    samples = {s["item"]: s for s in map(json.loads, (folder / "samples.jsonl").read_text().splitlines())}
    assert (
        samples[broken.item.external_id]["error"] == broken.error and samples[mended.item.external_id]["error"] is None
    )


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


def test_run_inference_wait_warns_about_unreadable_judge_replies_and_strict_makes_them_fatal(
    eager, standin, make_project, tmp_path
):
    from io import StringIO

    from django.core.management import call_command

    standin.rule = lambda key: "alwaysbadjson"  # every reply stays unreadable, no request fails
    project = make_project("osc", "oscbench")
    factories.release_of(project, factories.oscbench_items(project, 3, tmp_path))
    _endpoint(standin)
    args = [
        "run_inference",
        "--endpoint",
        "standin-judge",
        "--project",
        "osc",
        "--release",
        "v1",
        "--protocol",
        "oscbench",
        "--param",
        "frames=4",
        "--wait",
        "--poll",
        "0.05",
    ]
    err = StringIO()
    call_command(*args, stdout=StringIO(), stderr=err)  # no SystemExit: exit status 0
    job = InferenceJob.objects.get()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 3, 0)
    assert err.getvalue() == (
        f"warning: job {job.pk} finished with 3 of 3 replies unreadable (not valid JSON after the repairs; "
        "scored as missing); ask again with the admin action 'Retry failed items'\n"
    )

    with pytest.raises(SystemExit) as exc:
        call_command(*args, "--strict", stdout=StringIO(), stderr=StringIO())
    assert exc.value.code == 2


def test_api_key_comes_from_the_environment_and_is_never_stored(eager, standin, make_project, tmp_path, monkeypatch):
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 3, tmp_path)
    endpoint = services.endpoint_create(
        name="keyed",
        backend="openai",
        model_id="m",
        base_url=standin.base_url,
        api_key_env="STATELAB_KEY_STANDIN",
        options={"timeout": 0.5, "max_retries": 2},
    )
    # Unset: refused before a job exists (tests/inference/test_job_key_refusal.py has every launch path).
    monkeypatch.delenv("STATELAB_KEY_STANDIN", raising=False)
    with pytest.raises(services.JobRefused, match="reads its API key from STATELAB_KEY_STANDIN, which is not set"):
        services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items))
    assert InferenceJob.objects.count() == 0

    monkeypatch.setenv("STATELAB_KEY_STANDIN", "sk-secret-123")
    job2 = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items, "v2"))
    job2.refresh_from_db()
    assert job2.status == JobStatus.FINISHED
    from django.db import connection

    with connection.cursor() as cur:
        for table in ("inference_modelendpoint", "inference_inferencejob", "inference_prediction"):
            cur.execute(f"SELECT * FROM {table}")
            assert "sk-secret-123" not in json.dumps(cur.fetchall(), default=str)


def test_run_inference_wait_exits_non_zero_when_every_query_failed(eager, make_project, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    from tests.inference.openai_standin import StandIn

    gone = StandIn(faults=False).start()
    gone.stop()  # its port now refuses connections: the server is unreachable
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 5, tmp_path)
    factories.release_of(project, items)
    services.endpoint_create(
        name="unreachable",
        backend="openai",
        model_id="m",
        base_url=gone.base_url,
        options={"timeout": 2, "max_retries": 1},
    )
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exc:
        call_command(
            "run_inference",
            "--endpoint",
            "unreachable",
            "--project",
            "vt",
            "--release",
            "v1",
            "--protocol",
            "visualtrans",
            "--wait",
            "--poll",
            "0.05",
            stdout=out,
            stderr=err,
        )
    assert exc.value.code == 1
    job = InferenceJob.objects.get()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FAILED, 0, 5)
    assert job.error.startswith("all 5 queries failed: 5× connection failed: ")
    assert job.error.endswith("(after 2 attempts)")
    assert err.getvalue().startswith(f"job {job.pk} failed: all 5 queries failed: 5× connection failed")
    assert out.getvalue().splitlines()[-1].startswith(f"job {job.pk} failed: 100.0% (0 done, 5 failed of 5)")
    # The export is still written, so the errors can be read there too.
    results = json.loads((services.job_export_dir(job) / "results.json").read_text())
    assert (results["status"], results["counts"]["failed"]) == ("failed", 5)


def test_run_inference_wait_warns_about_partial_failures_and_strict_makes_them_fatal(
    eager, standin, make_project, tmp_path
):
    from io import StringIO

    from django.core.management import call_command

    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 60, tmp_path)
    factories.release_of(project, items)
    _endpoint(standin)
    args = [
        "run_inference",
        "--endpoint",
        "standin-judge",
        "--project",
        "vt",
        "--release",
        "v1",
        "--protocol",
        "visualtrans",
        "--wait",
        "--poll",
        "0.05",
    ]
    err = StringIO()
    call_command(*args, stdout=StringIO(), stderr=err)  # no SystemExit: exit status 0
    job = InferenceJob.objects.get()
    assert job.status == JobStatus.FINISHED and 1 <= job.failed_queries < 60
    assert err.getvalue().startswith(f"warning: job {job.pk} finished with {job.failed_queries} of 60 queries failed (")
    assert "HTTP 500: internal error (after 3 attempts)" in err.getvalue()

    with pytest.raises(SystemExit) as exc:
        call_command(*args, "--strict", stdout=StringIO(), stderr=StringIO())
    assert exc.value.code == 2
