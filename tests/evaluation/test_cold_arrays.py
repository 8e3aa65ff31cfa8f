"""A frozen STATUS board read as arrays (evaluation/scoring/choice_arrays.py, choice_answers.py) is
exactly the board the record readers give: every stored answer the record path can read, odd ones
included, scored alike. The record path is the oracle; STATUS is the protocol with an array form."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from annotation.models import ReleaseItem
from annotation.protocols import resolve_queries
from evaluation import leaderboard, selectors
from evaluation.scoring import choice_answers, choice_arrays, packed
from inference.models import InferenceJob, Prediction, PredictionStatus
from protocols import registry
from tests.evaluation.test_cold_board import _boards, _project

pytestmark = pytest.mark.django_db


def _restore_resolved(release) -> None:
    """The fixture's first item was frozen without its option orders; give them back."""
    first = ReleaseItem.objects.select_related("item").get(release=release, position=0)
    payload = {k: v for k, v in first.payload.items() if k != "id"}
    first.payload["resolved"] = resolve_queries("status", first.item.external_id, payload, seed=release.option_seed)
    first.save()


def _set(job, n: int, **fields) -> Prediction:
    """Overwrite the n-th prediction (by id) of ``job`` with raw JSON (SQL, so any JSON can be stored)."""
    pred = Prediction.objects.filter(job=job).order_by("id")[n]
    sets = ", ".join(f"{name} = %s::jsonb" if name != "status" else "status = %s" for name in fields)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE inference_prediction SET {sets} WHERE id = %s", [*fields.values(), pred.pk])
    return pred


def _odd_answers(release) -> None:
    """Stored answers each pass maps differently: bare letters, other texts, orders reversed or
    permuted or unreadable, log-probs absent, null, as text, beyond float range, as a false list."""
    job = InferenceJob.objects.get(release=release, model_name="model-a")
    resolved = {ri.item_id: ri.payload["resolved"] for ri in ReleaseItem.objects.filter(release=release)}
    preds = list(Prediction.objects.filter(job=job).order_by("id"))

    def options(n: int) -> list:
        return resolved[preds[n].item_id][preds[n].query]["options"]

    sci4 = [n for n, p in enumerate(preds) if p.query == "sci4"]
    osi = [n for n, p in enumerate(preds) if p.query == "osi_a"]
    _set(job, osi[0], answer='"b"', options="[]")  # a lower-case letter: read in Python
    _set(job, osi[1], answer='"Answer: (B)"', logprobs='{"A": null, "B": -0.1}')
    _set(job, osi[2], answer='"A"', logprobs='{"B": -0.1}')  # A absent: probability 0
    _set(job, osi[3], answer='"A"', logprobs='{"A": "-0.5"}')  # a number as text
    _set(job, osi[4], answer='"B"', logprobs='{"A": -1e-400}')  # below float8: Python reads -0.0
    _set(job, osi[5], answer='"B"', logprobs="[]", options="{}")  # false values: nothing stored
    _set(job, osi[6], answer='"B"', options=json.dumps(options(osi[6])[::-1]), logprobs='{"B": -2.5}')
    _set(job, osi[7], answer='"A"', options='"xyz"')  # an order that is no list
    _set(job, osi[8], answer='"A"', options=json.dumps(options(osi[8]) + ["more", "and more", "even more"]))
    _set(job, osi[9], answer='"C"', status=PredictionStatus.OK)  # out of range for two options
    _set(job, sci4[0], answer='"D"', options=json.dumps(options(sci4[0])[1:] + options(sci4[0])[:1]))
    _set(job, sci4[1], answer='"B"', options=json.dumps(options(sci4[1])[::-1]), logprobs='{"A": -1, "D": -3}')
    _set(job, sci4[2], answer="[1, 2]")
    _set(job, sci4[3], answer='"A"', options=json.dumps([options(sci4[3])]))  # the list inside a list


def _clusters(release, values) -> None:
    for pos, value in enumerate(values):
        ri = ReleaseItem.objects.get(release=release, position=pos)
        ri.payload["extra"] = {"video_id": value}
        ri.save()


def _array_board(project, monkeypatch) -> dict:
    """The board with the record readers unreachable: it must come from the arrays."""
    with monkeypatch.context() as m:
        m.setattr(selectors, "scoring_items", None)
        m.setattr(selectors, "job_answers", None)
        return _boards(project)


def _record_board(project, monkeypatch) -> dict:
    with monkeypatch.context() as m:
        m.setattr(choice_arrays, "array_form", lambda protocol: False)
        return _boards(project)


@pytest.fixture
def status_board():
    project, release = _project("status")
    _restore_resolved(release)
    _odd_answers(release)
    _clusters(release, ["v1", "v1", "v2", 7, 7.0, "", None, "v2", 3.5, "v1"])
    return project, release


def test_array_board_is_the_record_board(status_board, monkeypatch):
    project, _ = status_board
    arrays = _array_board(project, monkeypatch)
    records = _record_board(project, monkeypatch)
    assert arrays == records
    board = json.loads(arrays[None])
    assert {"model-a", "model-b", "Random"} <= {row["model"] for row in board["rows"]}
    model_a = next(row for row in board["rows"] if row["model"] == "model-a")
    assert "reassigned" in model_a["diagnostics"]  # log-probs were read
    assert model_a["parse_failures"] > 0
    # Clustered errors differ from the plain ones (the video ids group items), on both paths alike.
    assert model_a["se_clustered"] != model_a["se"]


def test_each_job_reads_as_its_records(status_board):
    """Per answer set: the arrays score exactly as the record path's answer objects."""
    project, release = status_board
    read = choice_arrays.release_items("status", release)
    assert read is not None
    items, hashes, _ = read
    scoring = registry.get("status").scoring
    records = selectors.scoring_items(project, release)
    assert items.item_ids.tolist() == [it.key for it in records]
    for job in InferenceJob.objects.filter(release=release):
        arrays = scoring.score_columns(items, choice_answers.job_answers("status", job, items, hashes))
        expected = scoring.score(records, selectors.job_answers(job))
        assert arrays.keys == expected.keys
        assert (arrays.num == expected.num).all() and (arrays.den == expected.den).all()
        assert arrays.parse_failures == expected.parse_failures
        assert arrays.diagnostics == expected.diagnostics


@pytest.mark.parametrize("change", ["no_resolved", "bool_cluster", "live"])
def test_what_arrays_cannot_read_is_read_as_records(status_board, monkeypatch, change):
    project, release = status_board
    if change == "no_resolved":
        first = ReleaseItem.objects.get(release=release, position=3)
        first.payload = {k: v for k, v in first.payload.items() if k != "resolved"}
        first.save()
    if change == "bool_cluster":
        _clusters(release, [True])
    live = change == "live"
    jobs = [(j.model_name, j) for j in InferenceJob.objects.filter(release=None if live else release)]
    assert choice_arrays.board_rows("status", None if live else release, jobs, seed=1) is None
    assert _record_board(project, monkeypatch) == _boards(project)


def test_a_mapping_slip_would_show(status_board, monkeypatch):
    """The comparison can fail: without the hashes of the false values, predictions with an empty
    stored order read as another order (no letter shown there) and the board changes."""
    project, _ = status_board
    records = _record_board(project, monkeypatch)
    monkeypatch.setattr(choice_answers, "_falsy_hashes", lambda: choice_answers.np.zeros(1, dtype="int64"))
    assert _array_board(project, monkeypatch) != records


def test_leaderboard_uses_the_arrays_for_a_frozen_status_release(status_board, monkeypatch):
    project, _ = status_board
    calls = []
    real = choice_arrays.board_rows
    monkeypatch.setattr(choice_arrays, "board_rows", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    leaderboard.build(project, release_version="v1", n_boot=20)
    assert calls == ["status"]


@pytest.mark.django_db(transaction=True)
def test_reads_in_parallel_outside_a_transaction(monkeypatch):
    """Committed data, small chunks: the packed reads run two at a time on their own connections
    (evaluation/scoring/packed.py) and the board is still the record board."""
    project, release = _project("status")
    _restore_resolved(release)
    _odd_answers(release)
    monkeypatch.setattr(choice_arrays, "ITEMS_PER_READ", 4)
    monkeypatch.setattr(choice_answers, "ROWS_PER_READ", 20)
    threads = []
    real = packed._read_in_thread
    monkeypatch.setattr(packed, "_read_in_thread", lambda *a: threads.append(1) or real(*a))
    assert _array_board(project, monkeypatch) == _record_board(project, monkeypatch)
    assert len(threads) >= 8  # items in 4 reads, each job's predictions in several
