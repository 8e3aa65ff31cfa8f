"""The parsed columns of a prediction (inference/models.py, Prediction: answer_code, logprob_kind,
logprob_a, options_hash) are filled by every writer, equal the JSON reading the cold board falls
back to (evaluation/scoring/choice_answers.py, parsed_expressions), follow any change of the JSON,
and a row without them (stored before the columns, not backfilled yet) reads as before."""

from __future__ import annotations

import importlib
import json
from types import SimpleNamespace

import pytest
from django.db import connection

from annotation.models import ReleaseItem
from evaluation.scoring import choice_answers
from inference import services
from inference.models import InferenceJob, Prediction, PredictionStatus
from inference.services.predictions import PredictionRow, predictions_upsert
from tests.evaluation.test_cold_arrays import _array_board, _record_board, status_board  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

COLUMNS = choice_answers.PARSED_COLUMNS
# (status, answer, options, logprobs) as JSON text (None: SQL NULL): every case the readers tell apart.
ODD = [
    ("ok", '"A"', '["x", "y"]', '{"A": -0.25, "B": -1.5}'),
    ("ok", '"Z"', "[]", None),
    ("ok", '"b"', "{}", "[]"),
    ("ok", '"AB"', '"xyz"', '{"A": null}'),
    ("ok", '"Answer: (B)"', '[["x", "y"]]', '{"B": -0.1}'),
    ("ok", "null", "null", '{"A": "-0.5"}'),
    ("ok", None, '[1, "x"]', '{"A": -1e-400}'),
    ("ok", "[1, 2]", '["x", "y", "z", "w", "v"]', '{"A": 1e299}'),
    ("ok", "7", "0", "{}"),
    ("ok", '{"k": 1}', "false", "false"),
    ("ok", '"["', '""', '""'),
    ("failed", '"A"', '["x", "y"]', '{"A": -0.25}'),
    ("failed", None, "[]", None),
    ("ok", '"D"', '["x", "y", "z", "w"]', '{"A": [1]}'),
    ("ok", '"C"', '["é\\t\\"q\\""]', '{"A": 0}'),
    ("ok", '"A"', '["x"]', "0"),
    ("ok", '"A"', '["x"]', '"text"'),
]


def _job(release) -> InferenceJob:
    return InferenceJob.objects.get(release=release, model_name="model-a")


def _stored(ids) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(COLUMNS)} FROM inference_prediction WHERE id = ANY(%s) ORDER BY id", [ids])
        return cursor.fetchall()


def _mismatches(ids) -> list[int]:
    """Rows whose parsed columns differ from the JSON reading (or are empty)."""
    expressions = choice_answers.parsed_expressions()
    differs = " OR ".join(f"{c} IS DISTINCT FROM ({expressions[c]})" for c in COLUMNS)
    nulls = " OR ".join(f"{c} IS NULL" for c in COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM inference_prediction WHERE id = ANY(%s) AND ({differs} OR {nulls})", [ids])
        return [r[0] for r in cursor.fetchall()]


def _trigger(enabled: bool) -> None:
    """Triggers off (rows written as before the columns existed) or on again, in this transaction."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL session_replication_role = {'origin' if enabled else 'replica'}")


def _ids(job) -> list[int]:
    return list(Prediction.objects.filter(job=job).order_by("id").values_list("id", flat=True))


def _write_odd(ids) -> None:
    """Raw SQL updates: each odd value on one row."""
    with connection.cursor() as cursor:
        for pk, (status, answer, options, logprobs) in zip(ids, ODD, strict=False):
            cursor.execute(
                "UPDATE inference_prediction SET status = %s, answer = %s::jsonb, options = %s::jsonb,"
                " logprobs = %s::jsonb WHERE id = %s",
                [status, answer, options, logprobs, pk],
            )


def test_columns_equal_the_json_reading_on_every_odd_value(status_board):  # noqa: F811
    _, release = status_board
    ids = _ids(_job(release))
    _write_odd(ids[: len(ODD)])
    assert not _mismatches(ids)
    stored = _stored(ids[: len(ODD)])
    assert stored[0][:3] == (0, 1, -0.25)  # "A", log P(A) a number
    assert stored[1][:2] == (25, 0)  # "Z"; no log-probs
    assert stored[3][:2] == (-2, 2)  # not a bare letter; A null: probability 0
    assert [s[1] for s in stored[5:8]] == [3, 3, 1]  # a number as text, one below float8: Python; 1e299 read
    assert stored[11][0] == stored[12][0] == -1  # failed
    assert stored[13][:2] == (3, 3)
    # The hash is the release side's: PostgreSQL's hash of the JSON text; 0 for no order.
    with connection.cursor() as cursor:
        cursor.execute('SELECT hashtextextended(\'["x", "y"]\'::jsonb::text, 0)')
        assert stored[0][3] == cursor.fetchone()[0] != 0


def test_a_change_of_the_json_changes_the_columns(status_board):  # noqa: F811
    _, release = status_board
    pred = Prediction.objects.filter(job=_job(release), status=PredictionStatus.OK).order_by("id").first()
    Prediction.objects.filter(pk=pred.pk).update(answer="C", logprobs={"A": -2.0})
    assert _stored([pred.pk])[0][:3] == (2, 1, -2.0)
    pred.refresh_from_db()
    pred.status, pred.answer_code = PredictionStatus.FAILED, 5  # a hand-written value is replaced
    pred.save()
    assert _stored([pred.pk])[0][0] == -1
    assert not _mismatches([pred.pk])


def test_job_results_fill_the_columns(status_board):  # noqa: F811
    """A chunk's results (predictions_upsert): new rows, and a failed row answered on retry."""
    _, release = status_board
    job = _job(release)
    rows = list(Prediction.objects.filter(job=job).order_by("id")[:3])
    Prediction.objects.filter(pk__in=[r.pk for r in rows]).delete()
    first = [
        PredictionRow(rows[0].item_id, rows[0].query, PredictionStatus.OK, options=["p", "q"], answer="B"),
        PredictionRow(rows[1].item_id, rows[1].query, PredictionStatus.FAILED, error="timeout"),
        PredictionRow(rows[2].item_id, rows[2].query, PredictionStatus.OK, answer="A", logprobs={"A": -0.5, "B": -1.0}),
    ]
    predictions_upsert(job_id=job.pk, rows=first)
    retry = [PredictionRow(rows[1].item_id, rows[1].query, PredictionStatus.OK, answer="D", logprobs={"B": -1.0})]
    predictions_upsert(job_id=job.pk, rows=retry)
    stored = {
        (p.item_id, p.query): p
        for p in Prediction.objects.filter(job=job, item_id__in=[r.item_id for r in rows]).order_by("id")
    }
    got = [stored[(r.item_id, r.query)] for r in rows]
    assert [(p.answer_code, p.logprob_kind, p.logprob_a) for p in got] == [(1, 0, 0.0), (3, 2, 0.0), (0, 1, -0.5)]
    assert not _mismatches([p.pk for p in got])


def test_imported_predictions_fill_the_columns(status_board):  # noqa: F811
    project, release = status_board
    first = ReleaseItem.objects.filter(release=release).order_by("position").first()
    lines = [
        json.dumps({"item": first.payload["id"], "query": "osi_a", "answer": "B", "logprobs": {"A": -3.0}}),
        json.dumps({"item": first.payload["id"], "query": "osi_b", "answer": "no idea"}),
    ]
    job = services.predictions_import(project=project, lines=lines, model_name="elsewhere", release=release)
    got = {p.query: p for p in Prediction.objects.filter(job=job)}
    assert (got["osi_a"].answer_code, got["osi_a"].logprob_kind, got["osi_a"].logprob_a) == (1, 1, -3.0)
    assert got["osi_b"].answer_code == -1  # stored as failed
    with connection.cursor() as cursor:  # the release's order, hashed as the release side is
        cursor.execute("SELECT hashtextextended(%s::jsonb::text, 0)", [json.dumps(got["osi_a"].options)])
        assert got["osi_a"].options_hash == cursor.fetchone()[0] != 0
    assert not _mismatches([p.pk for p in got.values()])


def test_a_rescore_fills_the_columns(status_board):  # noqa: F811
    """A re-score (inference/services/jobs.py, job_rescore) rewrites answers with bulk_update."""
    _, release = status_board
    job = _job(release)
    pred = Prediction.objects.filter(job=job, status=PredictionStatus.OK, query="sci4").order_by("id").first()
    Prediction.objects.filter(pk=pred.pk).update(raw_output="D", answer="A")
    assert _stored([pred.pk])[0][0] == 0
    assert services.job_rescore(job=job) >= 1
    pred.refresh_from_db()
    assert (pred.answer, pred.answer_code) == ("D", 3)
    assert not _mismatches(_ids(job))


def test_copy_fills_the_columns(status_board):  # noqa: F811
    """COPY (the bench's and any bulk loader's way in) goes through the trigger too."""
    _, release = status_board
    job = _job(release)
    pred = Prediction.objects.filter(job=job).order_by("id").first()
    Prediction.objects.filter(pk=pred.pk).delete()
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(
            "COPY inference_prediction (query, status, error, prompt, options, raw_output, answer, logprobs,"
            " attempts, json_repairs, latency_ms, prompt_tokens, completion_tokens, created_at, updated_at,"
            " item_id, job_id) FROM STDIN"
        ) as copy,
    ):
        line = [pred.query, "ok", "", "", '["a", "b"]', "", '"B"', '{"A": -0.75}', 1, 0, 0, 0, 0, "now", "now"]
        copy.write("\t".join(map(str, [*line, pred.item_id, job.pk])) + "\n")
    copied = Prediction.objects.get(job=job, item_id=pred.item_id, query=pred.query)
    assert (copied.answer_code, copied.logprob_kind, copied.logprob_a) == (1, 1, -0.75)
    assert not _mismatches([copied.pk])


def test_rows_without_columns_read_as_before(status_board, monkeypatch):  # noqa: F811
    """Rows stored before the columns (empty) read from their JSON: the board is the record board,
    with every column empty and with half of them; and the columns are what the board reads (a wrong
    value in one changes it)."""
    project, release = status_board
    _write_odd(_ids(_job(release))[: len(ODD)])
    records = _record_board(project, monkeypatch)
    assert _array_board(project, monkeypatch) == records
    _trigger(False)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE inference_prediction SET {', '.join(c + ' = NULL' for c in COLUMNS)} WHERE id % 2 = 0")
    assert _array_board(project, monkeypatch) == records
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE inference_prediction SET {', '.join(c + ' = NULL' for c in COLUMNS)}")
    assert _array_board(project, monkeypatch) == records
    # A wrong stored value shows: the board reads the columns where they are filled.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE inference_prediction SET answer_code = CASE WHEN answer_code IS NULL AND status = 'ok' THEN 0"
            " ELSE answer_code END, logprob_kind = 0, logprob_a = 0, options_hash = 0"
            " WHERE job_id = %s AND query = 'sci4'",
            [_job(release).pk],
        )
    assert _array_board(project, monkeypatch) != records
    _trigger(True)


def test_backfill_fills_rows_stored_before(status_board, monkeypatch):  # noqa: F811
    _, release = status_board
    ids = _ids(_job(release))
    _write_odd(ids[: len(ODD)])
    _trigger(False)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE inference_prediction SET {', '.join(c + ' = NULL' for c in COLUMNS)}")
    _trigger(True)
    assert set(_mismatches(ids)) == set(ids)
    migration = importlib.import_module("inference.migrations.0012_prediction_parsed_backfill")
    monkeypatch.setattr(migration, "BATCH", 7)  # several batches
    migration.backfill(None, SimpleNamespace(connection=connection))
    assert not _mismatches(ids)
    assert not Prediction.objects.filter(answer_code=None).exists()
