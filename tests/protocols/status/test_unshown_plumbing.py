import json
from types import SimpleNamespace

import pytest

from annotation.protocols import resolve_queries
from inference.prompting import MediaPreparer
from inference.services.inputs import build_queries, parse_reply
from inference.services.predictions import parse_prediction_lines
from protocols.kit.prompting import ItemInput
from tests.evaluation.factories import make_release
from tests.inference.factories import image_file

TAPE = {
    "image_a": "a.png",
    "image_b": "b.png",
    "state_a": "an extended tape measure",
    "state_b": "a retracted tape measure",
    "change": "fully retract the tape measure",
    "change_distractors": [
        "almost fully retract the tape measure",
        "retract the tape measure halfway",
        "slightly retract the tape measure",
    ],
}


@pytest.mark.django_db
def test_imported_prediction_naming_an_unshown_distractor_is_not_credited(make_project):
    project = make_project("p", "status")
    release = make_release(project, {"t1": TAPE}, seed=11)
    sci2 = resolve_queries("status", "t1", TAPE, seed=11)["sci2"]
    unshown = sci2["unshown"]
    for t in unshown:
        line = json.dumps({"item": "t1", "query": "sci2", "answer": f"They {t}."})
        assert [p.answer for p in parse_prediction_lines(project, release, [line])] == [None]
    line = json.dumps({"item": "t1", "query": "sci2", "answer": "They fully retract the tape measure."})
    assert [p.answer for p in parse_prediction_lines(project, release, [line])] == [sci2["answer"]]


def test_inference_reply_naming_an_unshown_distractor_is_not_credited(tmp_path):
    paths = {
        "image_a": str(image_file(tmp_path / "a.png", (1, 2, 3))),
        "image_b": str(image_file(tmp_path / "b.png", (9, 2, 3))),
    }
    resolved = resolve_queries("status", "x1", TAPE, seed=11)
    item = ItemInput(item_pk=1, external_id="x1", payload=TAPE, media_paths=paths, media_hashes={}, resolved=resolved)
    job = SimpleNamespace(protocol="status", params={}, mode="evaluate", project=None)
    out = {q.key: q for q in build_queries(job, item, MediaPreparer(cache_root=tmp_path))}
    assert out["sci2"].unshown == resolved["sci2"]["unshown"] and out["sci4"].unshown == []
    for t in resolved["sci2"]["unshown"]:
        assert parse_reply(job, out["sci2"], f"They {t}.") is None
    assert parse_reply(job, out["sci2"], "They fully retract the tape measure.") == resolved["sci2"]["answer"]
