"""An OSCBench release written back in the authors' layout (protocols/oscbench/writing.py): the
prompt split files in their original line order, the taxonomy rebuilt from the items, the videos
under their original names; the authors' loading steps (authors_eval.py) read the export, and the
reader gives the same lines again. Through the commands a researcher runs: import_items (format
detected), freeze_release, export_release --format oscbench-prompts."""

from __future__ import annotations

import copy
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.importing.samples import make_video
from annotation.models import Item, ItemStatus
from protocols.kit.releases import FormatRefused
from protocols.oscbench import protocol

from . import authors_eval
from .authors import SPLITS, prompt_lines, video_name, write_repository, write_videos

PROMPTS = protocol.format_named("oscbench-prompts", "items")
KLING = [1, 2, 3, 4, 5, 6, 7, 8]
WAN = [1, 3, 8]


def names(code: str, numbers: list[int]) -> list[str]:
    texts = {n: text for _, _, n, text in prompt_lines()}
    return [video_name(n, texts[n], code) for n in numbers]


def build(root: Path, clips: list[Path] | None = None) -> Path:
    write_repository(root)
    write_videos(root / "kling", names("kl", KLING), clips)
    write_videos(root / "wan", names("wa", WAN), clips)
    return root


def opener(root: Path):
    return lambda rel: open(root / rel, "rb")


def comparable(lines: list[dict]) -> list[dict]:
    """The lines less extra.objects: the rebuilt taxonomy holds the words items were tagged with,
    so an object a prompt names beside the one acted on is not in it (docs/importing.md)."""
    out = copy.deepcopy(lines)
    for line in out:
        line.get("extra", {}).pop("objects", None)
    return out


def check_with_authors_steps(exported: Path, lines: list[dict]) -> None:
    splits = authors_eval.prompt_splits(exported)
    assert splits == {split: texts for split, texts in SPLITS.items()}  # every line, in its order
    actions, objects = authors_eval.taxonomy(exported)
    for line in lines:
        for word, category in zip(line["action"].split(" and "), line["action_category"].split(" + "), strict=True):
            assert actions[word] == category
        if "object" in line:
            assert objects[line["object"]] == (line["object_category"], line["extra"]["object_subcategory"])
    for generator in ("kling", "wan"):
        judged = authors_eval.videos(exported / generator)
        ours = {line["extra"]["video_name"]: line["prompt"] for line in lines if line["generator"] == generator}
        assert judged.keys() == ours.keys()
        assert all(judged[key].rstrip(".") == ours[key].rstrip(".") for key in ours)
        every_prompt = {text for texts in splits.values() for text in texts}
        assert all(prompt in every_prompt for prompt in ours.values())


def test_a_read_release_writes_back_in_the_authors_layout_and_reads_the_same(tmp_path):
    root = build(tmp_path / "OSCBench-code")
    lines = list(PROMPTS.read(root).lines)
    exported = tmp_path / "export"

    written = PROMPTS.write(lines, exported, open_media=opener(root))

    assert PROMPTS.writes and (exported / "kling" / f"{lines[0]['extra']['video_name']}.mp4") in written
    # no trailing newline, as the authors' split files
    assert (exported / "prompt_splits" / "prompts_regular.txt").read_text() == "\n".join(SPLITS["regular"])
    check_with_authors_steps(exported, lines)
    again = list(PROMPTS.read(exported).lines)
    assert comparable(again) == comparable(lines)
    # the one object beside the acted-on one (bread, coated with butter) is what the rebuild loses
    assert [line["id"] for line in lines if "objects" in line["extra"]] == ["kling:regular:0004"]
    assert not any("objects" in line["extra"] for line in again)


def test_lines_no_item_names_are_left_out_and_the_rest_keep_their_order(tmp_path):
    root = build(tmp_path / "OSCBench-code")
    dropped = ("kling:regular:0001", "kling:regular:0002", "wan:regular:0001")
    lines = [line for line in PROMPTS.read(root).lines if line["id"] not in dropped]
    PROMPTS.write(lines, tmp_path / "export", open_media=opener(root))

    regular = (tmp_path / "export" / "prompt_splits" / "prompts_regular.txt").read_text().splitlines()
    assert regular == SPLITS["regular"][2:]
    again = list(PROMPTS.read(tmp_path / "export").lines)
    assert [(line["generator"], line["prompt"]) for line in again] == [
        (line["generator"], line["prompt"]) for line in lines
    ]


def test_an_added_item_follows_its_split_and_gets_a_name_the_judge_script_reads(tmp_path):
    root = build(tmp_path / "OSCBench-code")
    lines = list(PROMPTS.read(root).lines)
    lines.append(
        {
            "id": "new-1",
            "video": "kling/x.mp4",
            "prompt": "A cook is melting butter.",
            "generator": "kling",
            "scenario": "novel",
            "extra": {},
        }
    )
    PROMPTS.write(lines, tmp_path / "export")
    novel = (tmp_path / "export" / "prompt_splits" / "prompts_novel.txt").read_text().splitlines()
    assert novel == [*SPLITS["novel"], "A cook is melting butter."]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"scenario": "extra-hard"}, "scenario 'extra-hard'"),
        ({"prompt": "two\nlines"}, "expected one line of text"),
        ({"generator": "../up"}, "cannot name a file or folder"),
        ({"prompt": "Another prompt on the same line."}, "one split line holds one prompt"),
    ],
)
def test_lines_the_layout_cannot_hold_are_refused_naming_the_item(tmp_path, change, message):
    root = build(tmp_path / "OSCBench-code")
    lines = list(PROMPTS.read(root).lines)
    lines[-1] = {**lines[-1], **change}
    with pytest.raises(FormatRefused, match=message):
        PROMPTS.write(lines, tmp_path / "export")


@pytest.mark.django_db
def test_import_freeze_and_export_through_the_commands(tmp_path):
    clips = [make_video(tmp_path / "clips" / f"c{k}.mp4", k) for k in range(2)]
    root = build(tmp_path / "OSCBench-code", clips)
    original = list(PROMPTS.read(root).lines)

    out = StringIO()
    call_command("import_items", "osc", str(root), "--protocol", "oscbench", "--create", "--verified", stdout=out)
    assert "oscbench-prompts" in out.getvalue(), out.getvalue()
    items = Item.objects.filter(project__slug="osc")
    assert items.count() == len(KLING) + len(WAN)
    assert set(items.values_list("status", flat=True)) == {ItemStatus.VERIFIED}
    call_command("freeze_release", "osc", "v1", stdout=StringIO())
    exported = tmp_path / "export"
    call_command("export_release", "osc", "v1", "--format", "oscbench-prompts", "-o", str(exported), stderr=StringIO())

    check_with_authors_steps(exported, original)
    again = list(PROMPTS.read(exported).lines)
    assert comparable(again) == comparable(original)
    for line in original:
        assert (exported / line["video"]).read_bytes() == (root / line["video"]).read_bytes()
    assert not (exported / "evaluations-1-mean3.json").exists()  # a release holds items, not ratings
