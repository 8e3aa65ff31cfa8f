import json

from inference.backends.base import ModelQuery, Sampling
from inference.backends.random_backend import RandomBackend
from protocols.oscbench.prompts import JUDGE_SCHEMA


def _queries():
    return [
        ModelQuery(key=f"{i}|osi_a", messages=[{"role": "user", "content": f"item {i}"}], choices=["A", "B", "C", "D"])
        for i in range(400)
    ]


def test_random_backend_is_deterministic_per_seed_and_uniformish():
    first = [r.text for r in RandomBackend(seed=5).complete(_queries(), Sampling())]
    again = [r.text for r in RandomBackend(seed=5).complete(_queries(), Sampling())]
    other = [r.text for r in RandomBackend(seed=6).complete(_queries(), Sampling())]
    assert first == again
    assert first != other
    counts = {c: first.count(c) for c in "ABCD"}
    assert sum(counts.values()) == 400 and min(counts.values()) > 60


def test_random_backend_answer_depends_on_content_not_database_ids():
    q1 = ModelQuery(key="1|qa", messages=[{"role": "user", "content": "same"}], choices=["A", "B", "C"])
    q2 = ModelQuery(key="999|qa", messages=[{"role": "user", "content": "same"}], choices=["A", "B", "C"])
    assert RandomBackend(seed=1).answer(q1) == RandomBackend(seed=1).answer(q2)


def test_random_backend_follows_the_judge_schema():
    q = ModelQuery(key="1|judge", messages=[{"role": "user", "content": "rate"}], json_schema=JUDGE_SCHEMA)
    data = json.loads(RandomBackend(seed=0).answer(q))
    assert set(data) == {"evidence", "scores"}
    assert len(data["scores"]) == 8 and all(v in (1, 2, 3, 4, 5) for v in data["scores"].values())
