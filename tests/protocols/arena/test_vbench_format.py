"""VBench's human preference files (protocols/arena/formats.py, ``vbench-human-anno`` and
``vbench-human-anno-votes``): a file in the published shape imports as arena items and their
votes, freezes into a release, and that release written back in VBench's shape is the same bytes;
a file that breaks the shape is refused whole, naming the instance, the value and what was
expected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from annotation.importing import annotations_import, items_import
from annotation.importing.samples import make_video
from annotation.interchange.authors import authors_export
from annotation.models import Annotation
from annotation.releases import release_freeze, release_lines, release_media_opener
from protocols.arena import formats
from protocols.kit.releases import FormatRefused

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "authors" / "vbench_object_class.json"
ITEMS = next(f for f in formats.FORMATS if f.name == "vbench-human-anno")
VOTES = next(f for f in formats.FORMATS if f.name == "vbench-human-anno-votes")


def with_videos(tmp_path: Path) -> Path:
    """The fixture beside a tiny video at every path its instances list."""
    folder = tmp_path / "vbench"
    folder.mkdir()
    path = folder / FIXTURE.name
    shutil.copyfile(FIXTURE, path)
    paths = sorted({p for row in json.loads(FIXTURE.read_text(encoding="utf-8")) for p in row["videos"].values()})
    for seed, rel in enumerate(paths):
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        make_video(target, seed, frames=4, fps=4)
    return path


def test_the_reader_makes_one_item_per_pair_and_one_vote_each():
    lines = list(ITEMS.read(FIXTURE).lines)
    got = {x["id"]: (x["model_a"], x["model_b"], x["extra"]["vbench"]["winner"]) for x in lines}
    assert got == {
        "vbench_object_class-0000-lavie-vs-modelscope": ("lavie", "modelscope", "a"),
        "vbench_object_class-0000-lavie-vs-cogvideo": ("lavie", "cogvideo", "tie"),
        "vbench_object_class-0000-modelscope-vs-cogvideo": ("modelscope", "cogvideo", "b"),
        "vbench_object_class-0001-modelscope-vs-lavie": ("modelscope", "lavie", "a"),
        "vbench_object_class-0002-cogvideo-vs-lavie": ("cogvideo", "lavie", "b"),
    }
    first = lines[0]
    assert first["prompt"] == "a cat eating food out of a bowl"
    assert first["video_a"] == "lavie/object_class/a cat eating food out of a bowl-0.mp4"
    assert first["extra"]["vbench"]["fields"] == {
        "object_en": "cat",
        "question_en": "Which video shows the cat more accurately?",
    }
    votes = list(VOTES.read(FIXTURE).lines)
    assert votes == [{"item": x["id"], "rater": "vbench-human", "winner": got[x["id"]][2]} for x in lines]
    assert ITEMS.detect(FIXTURE) and VOTES.detect(FIXTURE)
    assert not formats.Votes().detect(FIXTURE)


@pytest.mark.django_db
def test_import_then_export_gives_the_same_file(make_project, tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    project = make_project("vb", "arena", annotations_per_item=1)
    path = with_videos(tmp_path)
    report = items_import(project=project, path=path, verified=True)
    assert report.format == "vbench-human-anno" and report.created == 5
    item = project.items.get(external_id="vbench_object_class-0000-modelscope-vs-cogvideo")
    assert (item.payload["model_a"], item.payload["model_b"]) == ("modelscope", "cogvideo")
    assert set(item.media) == {"video_a", "video_b"}

    votes = annotations_import(project=project, path=path)
    assert votes.format == "vbench-human-anno-votes" and votes.created == 5
    stored = {
        a.item.external_id: a.result for a in Annotation.objects.filter(item__project=project).select_related("item")
    }
    assert stored["vbench_object_class-0000-modelscope-vs-cogvideo"] == {"winner": "b"}
    assert stored["vbench_object_class-0000-lavie-vs-cogvideo"] == {"winner": "tie"}
    assert all(a.external_rater == "vbench-human" for a in Annotation.objects.filter(item__project=project))

    release = release_freeze(project=project, version="v1")
    out = tmp_path / "out"
    written = ITEMS.write(release_lines(release), out, open_media=release_media_opener(release))
    assert (out / FIXTURE.name).read_bytes() == FIXTURE.read_bytes()
    videos = sorted(p.relative_to(out).as_posix() for p in written if p.suffix == ".mp4")
    assert videos == sorted({p for row in json.loads(FIXTURE.read_text()) for p in row["videos"].values()})
    for rel in videos:
        assert (out / rel).read_bytes() == (path.parent / rel).read_bytes()


def refused(tmp_path, rows) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(FormatRefused) as caught:
        ITEMS.read(path)
    return str(caught.value)


def test_a_file_that_breaks_the_shape_is_refused_naming_what_and_where(tmp_path):
    row = json.loads(FIXTURE.read_text(encoding="utf-8"))[1]
    bad_label = json.loads(json.dumps(row))
    bad_label["human_anno"]["modelscope"]["lavie"] = 2
    assert "instance 0: human_anno['modelscope']['lavie'] is 2; expected 0, 0.5 or 1" in refused(tmp_path, [bad_label])
    clash = json.loads(json.dumps(row))
    clash["human_anno"]["lavie"]["modelscope"] = 1
    message = refused(tmp_path, [row, clash])
    assert "instance 1: human_anno['modelscope']['lavie'] = 1 but human_anno['lavie']['modelscope'] = 1" in message
    no_video = json.loads(json.dumps(row))
    del no_video["videos"]["lavie"]
    assert "human_anno names 'lavie', which videos does not list" in refused(tmp_path, [no_video])
    assert "no human_anno" in refused(tmp_path, [{"prompt_en": "x", "videos": {}}])
    assert "an empty array found" in refused(tmp_path, [])


def _ours(ext: str, prompt: str, a: str, b: str) -> dict:
    return {
        "id": ext,
        "prompt": prompt,
        "model_a": a,
        "model_b": b,
        "video_a": f"{a}/{ext}.mp4",
        "video_b": f"{b}/{ext}.mp4",
        "category": "ours",
    }


def test_items_made_in_the_project_are_written_with_their_collected_votes(tmp_path):
    lines = [_ours("p1", "cut the apple", "m1", "m2"), _ours("p2", "cut the apple", "m3", "m1")]
    lines.append(_ours("p3", "open the box", "m2", "m3"))  # nobody voted: no label, no instance
    votes = {
        "p1": [{"winner": "a"}, {"winner": "a", "criteria": {"state_change": "b"}}, {"winner": "b"}],
        "p2": [{"winner": "both_bad"}, {"winner": "b"}],  # 1 : 1, no majority -> equal quality
    }
    ITEMS.write(lines, tmp_path / "out", votes=votes)
    rows = json.loads((tmp_path / "out" / "ours.json").read_text(encoding="utf-8"))
    assert rows == [
        {
            "prompt_en": "cut the apple",
            "videos": {"m1": "m1/p1.mp4", "m2": "m2/p1.mp4"},
            "human_anno": {"m1": {"m2": 1}, "m2": {"m1": 0}},
        },
        {  # m1's output differs from p1's: a second instance of the prompt (one video per model there)
            "prompt_en": "cut the apple",
            "videos": {"m3": "m3/p2.mp4", "m1": "m1/p2.mp4"},
            "human_anno": {"m3": {"m1": 0.5}, "m1": {"m3": 0.5}},
        },
    ]
    # What VBench's shape reads back: the majority votes again, one per pair.
    again = {
        (x["model_a"], x["model_b"]): x["extra"]["vbench"]["winner"]
        for x in ITEMS.read(tmp_path / "out" / "ours.json").lines
    }
    assert again == {("m1", "m2"): "a", ("m3", "m1"): "tie"}


@pytest.mark.parametrize(
    "answers, label",
    [
        ([], None),
        ([{"winner": "b"}], "b"),
        ([{"winner": "a"}, {"winner": "tie"}, {"winner": "a"}], "a"),
        ([{"winner": "a"}, {"winner": "b"}], "tie"),
        ([{"winner": "both_bad"}, {"winner": "both_bad"}, {"winner": "a"}], "tie"),
        ([{"criteria": {"state_change": "a"}}], None),
    ],
)
def test_the_collected_label_is_the_majority(answers, label):
    assert formats.collected_label(answers) == label


def test_a_release_with_nothing_to_write_is_refused(tmp_path):
    with pytest.raises(FormatRefused, match="no label to write: no vote was collected"):
        ITEMS.write([_ours("p1", "p", "x", "y")], tmp_path / "out", votes={})
    line = {"id": "bare", "prompt": "p", "model_a": "x", "model_b": "y", "video_a": "a.mp4"}
    with pytest.raises(FormatRefused, match="item 'bare' has no the output of 'y'"):
        ITEMS.write([line], tmp_path / "out", votes={"bare": [{"winner": "a"}]})
    assert not (tmp_path / "out").exists()


@pytest.mark.django_db
def test_the_export_writes_the_votes_collected_in_statelab(make_project, tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    project = make_project("vb2", "arena", annotations_per_item=1)
    path = with_videos(tmp_path)
    items_import(project=project, path=path, verified=True)
    release = release_freeze(project=project, version="v1")
    # Nothing collected: the published labels, byte for byte.
    authors_export(release, "vbench-human-anno", tmp_path / "plain")
    assert (tmp_path / "plain" / FIXTURE.name).read_bytes() == FIXTURE.read_bytes()
    # Two raters collected here reverse the published "lavie over modelscope" of instance 0.
    votes = tmp_path / "votes.jsonl"
    pair = "vbench_object_class-0000-lavie-vs-modelscope"
    votes.write_text(
        "\n".join(json.dumps({"item": pair, "rater": r, "winner": "b"}) for r in ("r1", "r2")), encoding="utf-8"
    )
    assert annotations_import(project=project, path=votes).created == 2
    authors_export(release, "vbench-human-anno", tmp_path / "voted")
    rows = json.loads((tmp_path / "voted" / FIXTURE.name).read_text(encoding="utf-8"))
    published = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert rows[0]["human_anno"]["lavie"]["modelscope"] == 0 and rows[0]["human_anno"]["modelscope"]["lavie"] == 1
    rows[0]["human_anno"]["lavie"]["modelscope"], rows[0]["human_anno"]["modelscope"]["lavie"] = 1, 0
    assert rows == published  # nothing else moved
    # An excluded rater's votes are left out: one "b" vote against none is still a "b".
    project.settings = {**project.settings, "arena_excluded_raters": ["ext:r1"]}
    project.save(update_fields=["settings"])
    authors_export(release, "vbench-human-anno", tmp_path / "screened")
    rows = json.loads((tmp_path / "screened" / FIXTURE.name).read_text(encoding="utf-8"))
    assert rows[0]["human_anno"]["lavie"]["modelscope"] == 0
