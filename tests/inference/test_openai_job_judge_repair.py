"""The OSCBench judge's JSON replies against the local stand-in (tests/inference/openai_standin.py),
the real openai client, eager Celery: a malformed reply is repaired by asking again with the
conversation so far, and the repaired scores are what is stored and scored. A reply no repair makes
readable (the judge keeps cutting its JSON short, or the repair request itself fails) is stored as
given, scored as missing with its reason, every request of the query counted in its tries and
tokens; a re-score keeps those reasons in step with the stored replies."""

import json

import pytest

from inference import selectors, services
from inference.models import Prediction, PredictionStatus
from protocols.oscbench.prompts import JUDGE_SCHEMA
from tests.helpers.standin_jobs import judge_run as _judge_run

from .openai_standin import planned_fault, schema_reply, unrepairable_json_fault

pytestmark = pytest.mark.django_db(transaction=True)


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
