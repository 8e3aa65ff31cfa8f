"""The authors' release through the project: converted lines imported by the item importer as
verified items (without category and difference), frozen into a release that stores the SCI-2
distractor drawn for each item, written back in the authors' shape from the release, and a board
that shows the breakdown tables only where items carry the labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from annotation.importing import items_import
from annotation.models import Item, ItemStatus
from annotation.releases import release_freeze, release_lines, release_media_opener
from evaluation import leaderboard
from protocols.base import seeded_rng, shuffled
from protocols.status import formats, sci2_distractor
from tests.helpers.files import write_lines

from .authors import FIXTURE, author_row, authors_read, write_release

pytestmark = pytest.mark.django_db

FORMAT = formats.FORMATS[0]
SEED = 7


def import_converted(project, path: Path, *, labels: dict[str, dict] | None = None):
    """The release read by its format, its lines imported by the item importer as verified items.

    "extra" is left out of the JSONL, as for items made in a project; the import command's own path,
    which keeps it, is test_real_release_command.py.
    """
    conversion = FORMAT.read(path)
    lines = []
    for line in conversion.lines:
        line = {k: v for k, v in line.items() if k != "extra"}
        lines.append({**line, **(labels or {}).get(line["id"], {})})
    jsonl = write_lines(path.parent / "converted.jsonl" if path.is_file() else path / "converted.jsonl", lines)
    return items_import(project=project, path=jsonl, media_root=conversion.media_root, verified=True)


def test_a_release_imports_as_verified_items_and_freezes_with_its_sci2_distractors(make_project, tmp_path):
    rows = [author_row(i, answer=i % 4) for i in range(4)]
    write_release(tmp_path / "Bench", rows, images=True)
    project = make_project("sb", "status", option_seed=SEED)

    report = import_converted(project, tmp_path / "Bench")

    assert (report.lines, report.created) == (4, 4)
    item = Item.objects.get(project=project, external_id="2")
    assert item.status == ItemStatus.VERIFIED
    assert item.payload == {
        "image_a": "images/ex_0002_0.png",
        "image_b": "images/ex_0002_1.png",
        "state_a": "a closed box 2",
        "state_b": "an open box 2",
        "change": "shake the box",
        "change_distractors": ["lift the lid halfway", "open the box fully", "tape the box shut"],
    }

    release = release_freeze(project=project, version="v1")

    lines = list(release_lines(release))
    for line in lines:
        distractors = line["change_distractors"]
        pick = sci2_distractor(line["id"], seed=SEED)
        expected = shuffled([line["change"], distractors[pick]], seeded_rng(SEED, line["id"], "sci2"))
        sci2 = line["resolved"]["sci2"]
        assert sci2["options"] == expected
        assert sci2["answer"] == "AB"[expected.index(line["change"])]
        assert sci2["unshown"] == distractors[:pick] + distractors[pick + 1 :]

    FORMAT.write(lines, tmp_path / "out", open_media=release_media_opener(release))

    samples = authors_read(tmp_path / "out")
    assert [s["change"] for s in samples] == [r["diff_cap"]["captions"][r["diff_cap"]["answer"]] for r in rows]
    written = json.loads((tmp_path / "out" / "STATUS_Bench.json").read_text())
    # Items imported here without their extra (items made in a project have none): ids as text, no
    # provenance; the captions come back in the authors' alphabetical order, so the right one's
    # index too. With the extra (the importer's own path): test_real_release_command.py.
    assert [w["diff_cap"] for w in written] == [r["diff_cap"] for r in rows]
    assert [(w["id"], w["video_id"]) for w in written] == [(str(r["id"]), None) for r in rows]
    for sample in samples:
        for image in sample["images"]:
            assert (
                image.read_bytes()
                == (tmp_path / "Bench" / "images" / f"ex_{int(sample['id']):04d}_{image.stem[-1]}.png").read_bytes()
            )


def test_the_board_shows_the_breakdowns_only_where_items_carry_them(make_project, tmp_path):
    write_release(tmp_path / "a", [author_row(i) for i in range(3)], images=True)
    bare = make_project("bare", "status", option_seed=SEED)
    import_converted(bare, tmp_path / "a")
    release_freeze(project=bare, version="v1")

    board = leaderboard.build(bare, release_version="v1")

    assert [row["model"] for row in board["rows"]] == ["Random"]
    assert board["rows"][0]["breakdowns"] == {}
    assert leaderboard.breakdown_groups(board) == {}

    # One item labeled with a category (a labeling pass over the release): the category tables appear.
    write_release(tmp_path / "b", [author_row(i) for i in range(3)], images=True)
    labeled = make_project("labeled", "status", option_seed=SEED)
    import_converted(labeled, tmp_path / "b", labels={"1": {"category": "functional"}})
    release_freeze(project=labeled, version="v1")

    groups = leaderboard.breakdown_groups(leaderboard.build(labeled, release_version="v1"))

    assert list(groups) == ["category:positional", "category:functional", "category:other"]
    random_row = leaderboard.build(labeled, release_version="v1")["rows"][0]
    assert random_row["breakdowns"]["category:positional:roa"]["value"] is None  # no item in the group
    assert random_row["breakdowns"]["category:functional:acc_osi"]["value"] is not None


def test_the_real_release_imports_as_404_verified_items(make_project, tmp_path):
    folder = tmp_path / "Bench"
    folder.mkdir()
    (folder / "STATUS_Bench.json").write_bytes(FIXTURE.read_bytes())
    (folder / "images").mkdir()
    for row in json.loads(FIXTURE.read_text()):
        for k in (0, 1):
            Image.new("RGB", (4, 4), (row["id"] % 256, row["id"] // 256, 40 * k)).save(
                folder / "images" / f"{row[f'image_{k}']}.png"
            )
    project = make_project("real", "status", option_seed=SEED)

    report = import_converted(project, folder / "STATUS_Bench.json")

    assert (report.lines, report.created) == (404, 404)
    assert Item.objects.filter(project=project, status=ItemStatus.VERIFIED).count() == 404
    assert not Item.objects.filter(project=project, payload__has_key="category").exists()
    release = release_freeze(project=project, version="v1")
    assert release.item_count == 404
    tape = next(line for line in release_lines(release) if line["id"] == "50")
    assert tape["change"] == "fully retract the tape measure"
    assert len(tape["resolved"]["sci2"]["unshown"]) == 2
