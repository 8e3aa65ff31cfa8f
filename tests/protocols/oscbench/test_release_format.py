"""The OSCBench prompt splits, taxonomy and generator folders read as item lines
(protocols/oscbench/formats.py, release_layout.py; docs/protocols/oscbench.md, "The authors'
files"). Plain Python: no database."""

from __future__ import annotations

import pytest

from protocols.kit.releases import FormatRefused
from protocols.oscbench import protocol
from protocols.oscbench.release_layout import parse_video_name

from .authors import prompt_lines, video_name, write_repository, write_videos

PROMPTS = protocol.format_named("oscbench-prompts", "items")


def names(code: str, lines: list[int], numbers: dict[int, int] | None = None) -> list[str]:
    """Video names of the prompts.txt lines `lines` (numbered by that line unless `numbers` says)."""
    texts = {n: text for _, _, n, text in prompt_lines()}
    return [video_name((numbers or {}).get(n, n), texts[n], code) for n in lines]


@pytest.fixture
def release(tmp_path):
    root = write_repository(tmp_path / "OSCBench-code")
    write_videos(root / "kling", names("kl", [1, 2, 3, 4, 5, 6, 7, 8]))
    write_videos(root / "wan", names("wa", [1, 3]) + ["99_A_cat_is_dancing._wa.mp4"])
    return root


def test_the_authors_video_names_are_read_as_their_judge_script_reads_them():
    assert parse_video_name("12_A_man_is_chopping_kale_in_the_kitchen._kl") == (
        12,
        "kl",
        "A man is chopping kale in the kitchen.",
    )
    assert parse_video_name("Grating_carrots") == (None, None, "Grating carrots")


def test_one_item_per_video_with_ids_from_generator_split_and_line(release):
    assert PROMPTS.detect(release) and not PROMPTS.detect(release / "kling")

    conversion = PROMPTS.read(release)
    lines = list(conversion.lines)

    assert [line["id"] for line in lines] == [
        "kling:regular:0001",
        "kling:regular:0002",
        "kling:regular:0003",
        "kling:regular:0004",
        "kling:regular:0005",
        "kling:regular:0006",
        "kling:novel:0001",
        "kling:compositional:0001",
        "wan:regular:0001",
        "wan:regular:0003",
    ]
    assert conversion.media_root == release
    # A media root that holds the release is no folder of videos: they are the release's own.
    assert [line["id"] for line in PROMPTS.read(release, media_root=release.parent).lines] == [
        line["id"] for line in lines
    ]
    assert lines[0] == {
        "id": "kling:regular:0001",
        "video": "kling/1_A_man_is_chopping_kale_in_the_kitchen._kl.mp4",
        "prompt": "A man is chopping kale in the kitchen.",
        "generator": "kling",
        "scenario": "regular",
        "action": "chopping",
        "action_category": "Cutting",
        "object": "kale",
        "object_category": "Vegetables",
        "extra": {
            "prompt_line": 1,
            "prompts_txt_line": 1,
            "video_name": "1_A_man_is_chopping_kale_in_the_kitchen._kl",
            "video_code": "kl",
            "object_subcategory": "Leafy",
        },
    }
    by_id = {line["id"]: line for line in lines}
    # Of two objects, the one not after "the" is acted on; both are kept.
    assert (by_id["kling:regular:0004"]["object"], by_id["kling:regular:0004"]["extra"]["objects"]) == (
        "butter",
        ["bread", "butter"],
    )
    # The typo names no taxonomy object: the item has none, and the note says which line.
    assert "object" not in by_id["kling:regular:0005"] and "object_category" not in by_id["kling:regular:0005"]
    assert by_id["kling:regular:0006"]["object"] == "carrot"
    compositional = by_id["kling:compositional:0001"]
    assert (compositional["scenario"], compositional["action"], compositional["action_category"]) == (
        "compositional",
        "peeling and slicing",
        "Peeling + Cutting",
    )
    assert by_id["kling:novel:0001"]["action_category"] == "Grating"
    # The repeated prompt: each video on the line its number names.
    assert by_id["kling:regular:0002"]["video"].startswith("kling/2_")
    assert by_id["kling:regular:0003"]["video"].startswith("kling/3_")
    assert by_id["wan:regular:0003"]["video"].startswith("wan/3_")


def test_the_notes_say_what_was_mapped_repeated_and_missing(release):
    notes = PROMPTS.read(release).notes

    assert notes[0] == (
        "prompt splits: 8 lines (regular 6, novel 1, compositional 1), 7 distinct; prompts on more than one line: "
        "1 (2 lines), a video of one goes to the line its number names, else to the next line without a video"
    )
    assert notes[1] == "10 items, one per video, from 2 generators (kling 8, wan 2); id <generator>:<split>:<line>"
    assert (
        "prompt lines naming two taxonomy objects (the one not after “the” is taken, both kept under "
        "extra.objects): 1, regular 4" in notes
    )
    assert "prompt lines naming no taxonomy object (the item has no object): 1, regular 5" in notes
    assert (
        "videos missing: wan has none for 6 of 8 prompt lines: regular 2, regular 4, regular 5, regular 6, novel 1, …"
        in notes
    )
    assert not any(n.startswith("videos missing: kling") for n in notes)
    assert "videos spelling no prompt line, not imported: 1, wan/99_A_cat_is_dancing._wa.mp4" in notes


def test_a_repeated_prompt_whose_numbers_name_no_line_fills_its_lines_in_order(tmp_path):
    root = write_repository(tmp_path / "r")
    # Numbers of some other numbering (not a line of either file): the order of the numbers decides.
    write_videos(root / "veo", names("ve", [3, 2], numbers={3: 41, 2: 40}))
    lines = list(PROMPTS.read(root).lines)
    assert [(line["id"], line["extra"]["video_name"][:3]) for line in lines] == [
        ("veo:regular:0002", "40_"),
        ("veo:regular:0003", "41_"),
    ]


def test_a_flat_video_folder_names_each_generator_by_its_code(tmp_path):
    root = write_repository(tmp_path / "r")
    videos = write_videos(tmp_path / "video_gen", names("kl", [1]) + names("hy", [1, 7]))
    lines = list(PROMPTS.read(root, media_root=videos[0].parent).lines)
    assert [(line["id"], line["video"]) for line in lines] == [
        ("hy:regular:0001", "1_A_man_is_chopping_kale_in_the_kitchen._hy.mp4"),
        ("hy:novel:0001", "7_A_chef_is_zesting_grapefruit_in_the_kitchen._hy.mp4"),
        ("kl:regular:0001", "1_A_man_is_chopping_kale_in_the_kitchen._kl.mp4"),
    ]


def test_a_folder_without_the_release_or_its_videos_is_refused_in_one_message(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FormatRefused, match=r"expected the authors' repository folder, holding prompt_splits/"):
        PROMPTS.read(tmp_path / "empty")
    root = write_repository(tmp_path / "r")
    write_videos(root / "kling", ["1_Something_else_entirely._kl.mp4"])
    with pytest.raises(FormatRefused) as exc:
        PROMPTS.read(root)
    assert str(exc.value) == (
        "no video of a prompt line under r (1 .mp4 files spell no prompt line); expected one folder per generator "
        "of <number>_<prompt, spaces as underscores>_<two-letter code>.mp4 files"
    )
    (root / "prompt_splits" / "prompts_novel.txt").write_bytes(b"ok\n\xff\n")
    with pytest.raises(FormatRefused, match=r"prompts_novel.txt is not UTF-8 text"):
        PROMPTS.read(root)
