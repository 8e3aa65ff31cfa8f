"""Items through import_items + freeze_release (the io commands), predictions through
import_predictions, then the leaderboard JSON: the release's own option orders are what is scored."""

import json

import pytest
from django.core.management import call_command
from PIL import Image

from annotation.models import ReleaseItem
from tests.helpers.files import write_predictions
from tests.helpers.items import run_command, status_payload

pytestmark = pytest.mark.django_db


def test_import_items_freeze_import_predictions_leaderboard(tmp_path):
    lines = []
    for i in range(3):
        for side, color in (("a", (200, 10, 10)), ("b", (10, 10, 200))):
            Image.new("RGB", (16 + i, 12), color).save(tmp_path / f"{side}{i}.png")
        payload = status_payload(i)
        payload.update(image_a=f"a{i}.png", image_b=f"b{i}.png")
        lines.append(json.dumps({"id": f"s{i}", **payload}))
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(lines) + "\n")
    call_command(
        "import_items",
        "e2e",
        str(items),
        "--protocol",
        "status",
        "--create",
        "--verified",
        stdout=open("/dev/null", "w"),
    )
    call_command("freeze_release", "e2e", "v1", stdout=open("/dev/null", "w"))
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in ReleaseItem.objects.select_related("item")}
    assert sorted(resolved) == ["s0", "s1", "s2"]

    # Answer every query with the option text of the correct answer, except s2's sci4 (wrong letter).
    preds = []
    for ext, r in resolved.items():
        for q, spec in r.items():
            answer = spec["options"][ord(spec["answer"]) - 65] if not q.startswith("ir") else spec["answer"]
            if (ext, q) == ("s2", "sci4"):
                answer = "A" if spec["answer"] != "A" else "B"
            preds.append({"item": ext, "query": q, "answer": answer})
    out = run_command("import_predictions", "e2e", write_predictions(tmp_path, preds), "--model", "texty")
    assert "on release v1" in out
    board = json.loads(run_command("leaderboard", "e2e", "--format", "json", "--boot", "100"))
    assert board["release"] == "v1"
    row = board["rows"][0]
    assert row["model"] == "texty" and row["n"] == 3 and row["parse_failures"] == 0
    assert row["metrics"]["acc_osi"] == 100.0 and row["metrics"]["racc_sci"] == 66.67 and row["metrics"]["roa"] == 66.67
