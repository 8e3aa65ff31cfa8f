"""One job's answers to a release as arrays (evaluation/scoring/choice_arrays.py reads the items).

Pass 1 reads every prediction of the job as packed columns (evaluation/scoring/packed.py): the query's
column, the answer as a letter code, the hash of the option order stored with it and log P(A), from
the plain columns PostgreSQL fills when a prediction is written (inference/models.py, Prediction:
answer_code, logprob_kind, logprob_a, options_hash), so no JSON is read; a row stored before them
and not filled yet is read from its JSON by the same expressions. A prediction whose stored order
hashes like the release's list, or like an empty value (no order stored), is mapped right there.
Pass 2 reads, for the predictions seen in another order only (by primary key), the hash of each
option shown and the log-probs of the letters A-D, and maps letters by matching option hashes (the
first match, as ``list.index`` does). What neither pass can map (an answer that is not
a bare letter, odd log-probs, more than ``MAX_SHOWN`` options in another order) is read as JSON and
mapped by the protocol's ``column_answer``: the record path's own reading. Hashes are PostgreSQL's
64-bit ``hashtextextended`` of jsonb's canonical text (equal texts are equal values; equal values
written otherwise, 1 and 1.0, only go the longer way), option by option over strings only
(``jsonb_hash_extended`` is not used: it hashes ``[x]`` like ``x``).
"""

from __future__ import annotations

import json

import numpy as np
from django.db import connection
from psycopg import sql as pgsql

from inference.models import InferenceJob, PredictionStatus
from protocols import registry
from protocols.base import LETTERS
from protocols.kit.choice_columns import ChoiceAnswers, ChoiceItems
from protocols.kit.items import ModelAnswer

from .packed import int8_array, read_packed, read_packed_many

ROWS_PER_READ = 1_000_000  # predictions per packed read (about 26 MB): memory stays flat
MAX_SHOWN = 4  # options per query matched by hash in pass 2
FALSY_JSON = ("[]", "{}", '""', "0", "false", "null")  # JSON values Python reads as false: no order stored
_ORDER_HASH = "coalesce(hashtextextended(({})::text, 0), 0)"  # a stored option list's; the release's alike
PARSED_COLUMNS = ("answer_code", "logprob_kind", "logprob_a", "options_hash")  # inference/models.py, Prediction
_TEXT_MAX = 300  # a JSON number this short reads as a float8 (no overflow) exactly as Python reads it


def _lit(value) -> str:
    return pgsql.Literal(value).as_string(connection.connection)


def letter_code(text: str, otherwise: int) -> str:
    """SQL: the code (A=0) of a JSON value whose ``#>> '{}'`` text is ``text`` when it is one letter
    A..Z, else ``otherwise``. Only a JSON string has a one-letter text (a number's one character is
    a digit), so no type test is needed; SQL NULL (JSON null, no value) gives ``otherwise`` too."""
    return (
        f"CASE WHEN length({text}) = 1 AND ascii({text}) BETWEEN 65 AND 90 THEN ascii({text}) - 65 ELSE {otherwise} END"
    )


def _logprob_fields(value: str, text: str, suffix: str) -> list[tuple[str, str, str]]:
    """Kind (1: a number; 2: absent or null, probability 0; 3: read in Python) and value of one
    letter's log-prob (``value``: logprobs->letter, ``text``: its ``#>> '{}'``), logprobs known
    to be a non-empty object."""
    number = f"jsonb_typeof({value}) = 'number' AND length({text}) <= {_TEXT_MAX}"
    return [
        (
            f"k{suffix}",
            "i2",
            f"CASE WHEN {value} IS NULL OR {value} = 'null'::jsonb THEN 2 WHEN {number} THEN 1 ELSE 3 END",
        ),
        (f"lp{suffix}", "f8", f"CASE WHEN {number} THEN ({text})::float8 ELSE 0 END"),
    ]


def _letter_columns(letters: str) -> str:
    """Source columns la, ta (log-prob of A and its text), lb, tb, ... computed once per row."""
    return ", ".join(f"logprobs->{_lit(x)} AS l{x.lower()}, logprobs->>{_lit(x)} AS t{x.lower()}" for x in letters)


def _pass1_fields(queries: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """Item id; (query column + 1) * 256 + (answer code + 2) * 4 + log-prob kind in one int2; the
    stored order's hash; log P(A). Answer code: -1 none or failed, -2 not a bare letter (read in
    Python). Log-prob kind: 0 no log-probs (a false JSON value), 1/2 as ``_logprob_fields`` for A,
    3 read in Python. Each value is the row's parsed column (inference/models.py, Prediction: filled
    when the row is written), or, in a row not filled yet, the same expression over its JSON (only
    evaluated there: ``coalesce`` stops at the first non-null argument)."""
    if len(queries) > 120:
        raise ValueError("more queries than the packed column holds")
    parsed = {name: f"coalesce({name}, {expr})" for name, expr in parsed_expressions().items()}
    return [
        ("id", "i8", "item_id"),
        ("pid", "i8", "id"),
        (
            "c",
            "i2",
            f"coalesce(array_position({_lit(list(queries))}::text[], query), 0) * 256"
            f" + ({parsed['answer_code']} + 2) * 4 + {parsed['logprob_kind']}",
        ),
        ("h", "i8", parsed["options_hash"]),
        ("lp", "f8", parsed["logprob_a"]),
    ]


def parsed_expressions() -> dict[str, str]:
    """SQL over a prediction's JSON giving each parsed column's value: what the trigger of
    inference/migrations/0011_prediction_parsed_columns.py stores, the reading of a row not filled."""
    ok = _lit(str(PredictionStatus.OK))
    kind, value = _logprob_fields("(logprobs->'A')", "(logprobs->>'A')", "")
    letter = letter_code("(answer #>> '{}')", -2)
    return {
        "answer_code": f"CASE WHEN status <> {ok} THEN -1 ELSE {letter} END",
        "logprob_kind": (
            "CASE coalesce(jsonb_typeof(logprobs), 'null') WHEN 'null' THEN 0"
            f" WHEN 'object' THEN CASE WHEN logprobs = '{{}}'::jsonb THEN 0 ELSE {kind[2]} END"
            f" ELSE CASE WHEN logprobs IN ({', '.join(_lit(v) + '::jsonb' for v in FALSY_JSON)}) THEN 0 ELSE 3 END END"
        ),
        "logprob_a": value[2],
        "options_hash": _ORDER_HASH.format("options"),
    }


def _unpacked(c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query column or -1, answer code, log-prob kind) from the packed int2."""
    c = c.astype(np.int32)
    return c // 256 - 1, (c % 256) // 4 - 2, c % 4


def _chunks(job: InferenceJob) -> list[list[int]]:
    """Ranges of prediction ids holding about ``ROWS_PER_READ`` of the job's predictions each."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT min(id), max(id), count(*) FROM inference_prediction WHERE job_id = %s", [job.pk])
        low, high, count = cursor.fetchone()
    if not count:
        return []
    parts = -(-count // ROWS_PER_READ)
    span = -(-(high - low + 1) // parts)
    return [[job.pk, start, min(start + span - 1, high)] for start in range(low, high + 1, span)]


def _falsy_hashes() -> np.ndarray:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_ORDER_HASH.format('v::jsonb')} FROM unnest(%s::text[]) AS v", [list(FALSY_JSON)])
        return np.array([0] + [r[0] for r in cursor.fetchall()], dtype=np.int64)


def _row_of(sorted_ids: np.ndarray, rows_of: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The release row of each item id; -1 for an item not in the release."""
    if sorted_ids.shape[0] == 0:
        return np.full(ids.shape, -1, dtype=np.intp)
    where = np.searchsorted(sorted_ids, ids)
    clipped = np.minimum(where, sorted_ids.shape[0] - 1)
    return np.where(sorted_ids[clipped] == ids, rows_of[clipped], -1)


def job_answers(protocol: str, job: InferenceJob, items: ChoiceItems, hashes: np.ndarray) -> ChoiceAnswers:
    """One job's answers to ``items`` as arrays (predictions of other items or queries are not read);
    ``hashes``: (N, Q) hashes of the release's option lists."""
    shape = items.truth.shape
    out = ChoiceAnswers(
        predicted=np.full(shape, -1, dtype=np.int8),
        has_logprobs=np.zeros(shape, dtype=bool),
        logprob_a=np.full(shape, np.nan),
    )
    fields = _pass1_fields(items.queries)
    source = (
        f"SELECT id, item_id, query, status, answer, options, logprobs, {', '.join(PARSED_COLUMNS)}"
        " FROM inference_prediction WHERE job_id = %s AND id BETWEEN %s AND %s"
    )
    order = np.argsort(items.item_ids, kind="stable")
    sorted_ids = items.item_ids[order]
    falsy = _falsy_hashes()
    permuted: list[np.ndarray] = []
    odd: list[np.ndarray] = []
    for cols in read_packed_many(fields, source, _chunks(job)):
        rows = _row_of(sorted_ids, order, cols["id"])
        q, a, k = _unpacked(cols["c"])
        keep = (rows >= 0) & (q >= 0)
        ii, qq = rows[keep], q[keep].astype(np.intp)
        a, k, h, lp, pid = a[keep], k[keep], cols["h"][keep], cols["lp"][keep], cols["pid"][keep]
        del cols
        python = (a == -2) | (k == 3)
        same = (h == hashes[ii, qq]) | np.isin(h, falsy)
        odd.append(np.stack([ii[python], qq[python]], axis=1))
        other = ~python & ~same
        permuted.append(np.stack([ii[other], qq[other], a[other], k[other], pid[other]], axis=1))
        fine = ~python & same
        ii, qq, a, k, lp = ii[fine], qq[fine], a[fine], k[fine], lp[fine]
        out.predicted[ii, qq] = np.where((a >= 0) & (a < items.n_options[ii, qq]), a, -1)
        out.has_logprobs[ii, qq] = k > 0
        out.logprob_a[ii, qq] = np.where(k == 1, lp, np.where(k == 2, -np.inf, np.nan))
    moved = np.concatenate(permuted) if permuted else np.zeros((0, 5), dtype=np.int64)
    python_rows = [np.concatenate(odd)] if odd else []
    if moved.shape[0]:
        python_rows.append(_reordered(job, items, moved, out))
    rest = np.concatenate(python_rows) if python_rows else np.zeros((0, 2), dtype=np.int64)
    if rest.shape[0]:
        scoring = registry.get(protocol).scoring
        for i, j, (code, has, value) in _read_as_json(scoring, job, items, rest):
            out.predicted[i, j], out.has_logprobs[i, j], out.logprob_a[i, j] = code, has, value
    return out


def _element_hashes(prefix: str, expr: str) -> list[tuple[str, str, str]]:
    """Shown options (-1: not a list of at most ``MAX_SHOWN`` strings, the only lists matched by
    hash) and the hash of each of the first ``MAX_SHOWN``. ``expr``: a column of the source."""
    strings = " AND ".join(
        f"({e} >= jsonb_array_length({expr}) OR jsonb_typeof({expr}->{e}) = 'string')" for e in range(MAX_SHOWN)
    )
    return [
        (
            f"{prefix}n",
            "i2",
            f"CASE WHEN jsonb_typeof({expr}) = 'array' THEN CASE WHEN jsonb_array_length({expr}) <= {MAX_SHOWN}"
            f" AND {strings} THEN jsonb_array_length({expr}) ELSE -1 END ELSE -1 END",
        ),
        *((f"{prefix}e{e}", "i8", f"coalesce(hashtextextended({expr}->>{e}, 0), 0)") for e in range(MAX_SHOWN)),
    ]


def _first_match(shown: np.ndarray, n_shown: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per row, the first index e < n_shown with shown[:, e] == target; -1 when none."""
    hit = (shown == target[:, None]) & (np.arange(MAX_SHOWN)[None, :] < n_shown[:, None])
    return np.where(hit.any(axis=1), hit.argmax(axis=1), -1)


def _reordered(job: InferenceJob, items: ChoiceItems, moved: np.ndarray, out: ChoiceAnswers) -> np.ndarray:
    """Pass 2: the answers seen in another option order (``moved``: row, column, answer code,
    log-prob kind, prediction id), mapped by option hashes; returns the (row, column) pairs left to
    read as JSON."""
    ids = np.unique(items.item_ids[moved[:, 0]])
    queries = list(items.queries)
    seen_fields = [
        ("pid", "i8", "id"),
        *_element_hashes("s", "options"),
        *(f for x in LETTERS[:MAX_SHOWN] for f in _logprob_fields(f"l{x.lower()}", f"t{x.lower()}", x)),
    ]
    # Exactly the moved predictions, by primary key.
    seen = read_packed(
        seen_fields,
        f"SELECT id, options, {_letter_columns(LETTERS[:MAX_SHOWN])} FROM inference_prediction"
        " WHERE id = ANY(%s::int8[]) AND job_id = %s OFFSET 0",
        [int8_array(np.unique(moved[:, 4])), job.pk],
    )
    used = sorted({int(j) for j in np.unique(moved[:, 1])})  # the release's lists of these queries only
    release_fields = [("id", "i8", "item_id")] + [f for j in used for f in _element_hashes(f"r{j}", f"o{j}")]
    lists = ", ".join(f"payload->'resolved'->{_lit(queries[j])}->'options' AS o{j}" for j in used)
    release = read_packed(
        release_fields,
        f"SELECT item_id, {lists} FROM annotation_releaseitem WHERE release_id = %s AND item_id = ANY(%s::int8[])"
        " OFFSET 0",
        [job.release_id, int8_array(ids)],
    )
    blank = np.zeros(release["id"].shape, dtype=np.int64)
    for j in range(len(queries)):
        if j not in used:
            release[f"r{j}n"] = blank
            release.update({f"r{j}e{e}": blank for e in range(MAX_SHOWN)})
    # Rows of ``seen`` and ``release`` for each moved answer.
    ii, qq, a, k = (moved[:, c] for c in range(4))
    if not len(seen["pid"]):  # every moved prediction gone since pass 1 (a job's retry deletes them)
        return np.stack([ii, qq], axis=1)
    seen_order = np.argsort(seen["pid"], kind="stable")
    at = np.minimum(np.searchsorted(seen["pid"][seen_order], moved[:, 4]), len(seen_order) - 1)
    s_row = seen_order[at]
    gone = seen["pid"][s_row] != moved[:, 4]  # deleted between the passes: read as JSON, not a neighbour
    rel_order = np.argsort(release["id"], kind="stable")
    r_row = rel_order[np.searchsorted(release["id"][rel_order], items.item_ids[ii])]
    n_seen = seen["sn"][s_row]
    shown = np.stack([seen[f"se{e}"][s_row] for e in range(MAX_SHOWN)], axis=1)
    n_rel = np.choose(qq, [release[f"r{j}n"][r_row] for j in range(len(queries))])
    rel = np.stack(
        [np.choose(qq, [release[f"r{j}e{e}"][r_row] for j in range(len(queries))]) for e in range(MAX_SHOWN)], axis=1
    )
    python = gone | (n_seen < 0) | (n_seen > MAX_SHOWN) | (n_rel < 0) | (n_rel > MAX_SHOWN)
    # The answer's letter: the option shown there, found in the release's list (first match).
    valid = (a >= 0) & (a < n_seen)
    target = shown[np.arange(len(a)), np.clip(a, 0, MAX_SHOWN - 1)]
    code = np.where(valid, _first_match(rel, n_rel, target), -1)
    # log P of release option A under the letter it was shown as.
    where_a = np.where(n_rel > 0, _first_match(shown, n_seen, rel[:, 0]), -1)
    kinds = np.stack([seen[f"k{LETTERS[x]}"][s_row] for x in range(MAX_SHOWN)], axis=1)
    values = np.stack([seen[f"lp{LETTERS[x]}"][s_row] for x in range(MAX_SHOWN)], axis=1)
    pick = np.clip(where_a, 0, MAX_SHOWN - 1)
    kind_a = np.where(where_a >= 0, kinds[np.arange(len(a)), pick], 0)
    value_a = np.where(kind_a == 1, values[np.arange(len(a)), pick], np.where(kind_a == 2, -np.inf, np.nan))
    python |= (k > 0) & (kind_a == 3)
    fine = ~python
    i, j = ii[fine], qq[fine]
    out.predicted[i, j] = np.where(code[fine] < items.n_options[i, j], code[fine], -1)
    out.has_logprobs[i, j] = k[fine] > 0
    out.logprob_a[i, j] = np.where(k[fine] > 0, value_a[fine], np.nan)
    return np.stack([ii[python], qq[python]], axis=1)


def _read_as_json(scoring, job: InferenceJob, items: ChoiceItems, pairs: np.ndarray):
    """(row, column, protocol's reading) of the predictions neither pass could map, read as JSON
    like evaluation.selectors.job_answers reads them."""
    wanted = {(int(items.item_ids[i]), items.queries[j]): (int(i), int(j)) for i, j in pairs}
    ids = sorted({key for key, _ in wanted})
    ok = str(PredictionStatus.OK)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT item_id, (payload->'resolved')::text FROM annotation_releaseitem WHERE release_id = %s"
            " AND item_id = ANY(%s)",
            [job.release_id, ids],
        )
        resolved = {item_id: json.loads(value) for item_id, value in cursor.fetchall()}
        cursor.execute(
            "SELECT item_id, query, status, answer::text, options::text, logprobs::text FROM inference_prediction"
            " WHERE job_id = %s AND item_id = ANY(%s)",
            [job.pk, ids],
        )
        found = cursor.fetchall()
    for item_id, query, status, answer, options, logprobs in found:
        at = wanted.get((item_id, query))
        if at is None:
            continue
        value = json.loads(answer) if status == ok and answer is not None else None
        seen = (json.loads(options) if options is not None else None) or None
        lps = json.loads(logprobs) if logprobs is not None else None
        yield (
            at[0],
            at[1],
            scoring.column_answer(ModelAnswer(value, seen, lps), resolved[item_id][query]["options"], at[1]),
        )
