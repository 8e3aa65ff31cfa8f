"""The task folder export_release --format lmms-eval writes: ChangeIt's documents ask what StateLab's
own runs ask, on the crops inference would send (upright, clipped to the image); the command writes
a complete folder for every supported protocol and refuses OSCBench (a judge's agreement, not a
model's score) and unsafe media paths; the folder's utils.py stands alone (standard library and
Pillow only), and a protocol part that would not is refused. Its scores:
tests/annotation/test_lmms_eval_export.py."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest
from PIL import Image

from annotation.interchange import lmms_eval as writer
from annotation.protocols import QUERY_KEYS
from inference.media import load_image
from inference.prompting import MediaPreparer
from protocols.changeit import prompts as ci_protocol
from protocols.changeit import vocabulary as changeit_vocabulary
from protocols.kit.lmms import GENERIC_UTILS as TEMPLATE  # the generic part of every task's utils.py
from protocols.kit.lmms import LmmsExportError, assemble_utils
from protocols.kit.prompting import ItemInput
from tests.lmms import cases

SUPPORTED = ("status", "changeit", "visualtrans", "m3verse")


def _exif_rotated(path, size, orientation=6):
    """A JPEG stored `size` with an EXIF orientation (6: shown turned 90° clockwise)."""
    pixels = (((x * 17) % 256, (y * 29) % 256, (x * y) % 256) for y in range(size[1]) for x in range(size[0]))
    img = Image.frombytes("RGB", size, bytes(v for pixel in pixels for v in pixel))
    exif = Image.Exif()
    exif[0x0112] = orientation
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, "JPEG", exif=exif, quality=95)
    return path


def test_changeit_documents_and_crops_are_what_inference_asks(tmp_path):
    src = tmp_path / "src"
    _exif_rotated(src / "img/rot.jpg", (40, 20))  # shown 20 wide, 40 high
    Image.new("RGB", (30, 30), (9, 9, 9)).save(src / "img/plain.png")
    payloads = {
        "a-boxed": {
            "image": "img/rot.jpg",
            "object": "apple",
            "state": "whole apple",
            "distractors": ["sliced apple"],
            "bbox": [3, 25, 30, 30],
        },  # clipped to the upright image: x 3..20, y 25..40
        "b-nobox": {"image": "img/plain.png", "object": "apple", "state": "sliced apple", "distractors": []},
        "c-unsure": {"image": "img/plain.png", "object": "egg", "state": "raw egg", "bbox": "cannot_determine"},
        "d-outside": {"image": "img/plain.png", "object": "egg", "state": "boiled egg", "bbox": [31, 2, 5, 5]},
    }
    vocabulary = changeit_vocabulary(payloads.values())
    lines = [cases.release_line("changeit", k, p, vocabulary=vocabulary) for k, p in payloads.items()]
    out = tmp_path / "task"
    summary = writer.write_task(
        out, {"protocol": "changeit", "project": "ci", "version": "v1"}, lines, media=writer.folder_media(src)
    )
    assert summary["documents"] == 4 + 2 + 2 + 2 and summary["media"] == 2 + 1  # 2 images, 1 crop
    docs = [json.loads(x) for x in (out / "docs.jsonl").read_text().splitlines()]

    # The documents are the queries StateLab's own run asks (no crop query where inference fails
    # it), with its prompt, options and answer, the full image or the crop.
    preparer = MediaPreparer(cache_root=tmp_path / "cache", bound=(4096, 4096))
    asked = []
    for line in lines:
        item = ItemInput(
            item_pk=0,
            external_id=line["id"],
            payload=line,
            media_paths={"image": str(src / line["image"])},
            media_hashes={},
            resolved=line["resolved"],
        )
        for query in ci_protocol.build(item, media=preparer, params={}):
            if query.error is None:
                asked.append(
                    (
                        line["id"],
                        query.key,
                        query.prompt.removeprefix("[user]\n<image 1>\n"),
                        line["resolved"][query.key]["options"],
                        json.dumps(line["resolved"][query.key]["answer"]),
                    )
                )
    assert [(d["id"], d["query"], d["prompt"], d["options"], d["target"]) for d in docs] == asked
    assert [d["query"] for d in docs if d["id"] == "a-boxed"] == list(QUERY_KEYS["changeit"])
    crop = [d["visuals"] for d in docs if d["query"].endswith(":crop")]
    assert crop == [[writer.crop_path("a-boxed")]] * 2 and crop[0][0].startswith("media/statelab-crops/a-boxed-")
    assert [d["visuals"] for d in docs if d["id"] == "b-nobox"] == [["media/img/plain.png"]] * 2
    assert json.loads(docs[0]["meta"]) == {
        "object": "apple",
        "distractors": ["sliced apple"],
        "strategy": "standard",
        "condition": "full",
    }
    # The crop holds exactly the pixels inference sends (load_image with a bound it need not shrink
    # to): the upright image's x 3..20, y 25..40.
    with Image.open(out / crop[0][0]) as got:
        assert got.format == "PNG" and got.size == (17, 15)
        want = load_image(src / "img/rot.jpg", bbox=[3, 25, 30, 30], bound=(4096, 4096))
        assert got.convert("RGB").tobytes() == want.tobytes()
        with Image.open(src / "img/rot.jpg") as stored:  # not the stored (sideways) pixels
            assert got.convert("RGB").tobytes() != stored.convert("RGB").crop((3, 5, 20, 20)).tobytes()
    assert json.loads((out / "label_objects.json").read_text()) == {
        "sliced apple": "apple",
        "whole apple": "apple",
        "raw egg": "egg",
        "boiled egg": "egg",
    }


def test_unsupported_protocols_and_bad_media_paths(tmp_path):
    # OSCBench's figure is a judge's agreement with human raters, not a model's score on a task.
    with pytest.raises(writer.LmmsExportError, match="oscbench"):
        writer.write_task(tmp_path / "oscbench", {"protocol": "oscbench"}, [])
    line = {
        "id": "x",
        "images": ["../etc/passwd"],
        "question": "q",
        "format": "count",
        "options": [],
        "answer": 1,
        "subtask": "global",
        "resolved": {"qa": {"options": [], "answer": 1}},
    }
    with pytest.raises(writer.LmmsExportError, match="relative path"):
        writer.write_task(tmp_path / "bad", {"protocol": "visualtrans"}, [line])
    line = dict(line, images=["statelab-crops/x.png"])
    with pytest.raises(writer.LmmsExportError, match="box crops"):
        writer.write_task(tmp_path / "bad2", {"protocol": "visualtrans"}, [line])


@pytest.mark.django_db
@pytest.mark.parametrize("protocol", ["status", "changeit", "visualtrans", "m3verse"])
def test_export_release_command_writes_the_task_folder(protocol, make_project, tmp_path):
    from django.core.management import call_command

    from annotation.importing import items_import
    from annotation.importing.samples import write_sample_dataset
    from annotation.models import ReleaseItem
    from annotation.releases import release_freeze

    project = make_project(f"lm-{protocol}", protocol, option_seed=13, settings={})
    items_import(project=project, path=write_sample_dataset(tmp_path / "data", protocol, 4), verified=True)
    release = release_freeze(project=project, version="v1")
    out = tmp_path / "task"
    call_command("export_release", project.slug, "v1", "--format", "lmms-eval", "-o", str(out))

    name = f"statelab_lm_{protocol}_v1"
    utils_py = (out / "utils.py").read_text()
    assert (out / f"{name}.yaml").is_file() and utils_py == writer.lmms_task(protocol).utils_source()
    assert utils_py.startswith(TEMPLATE.read_text()) and f"protocols.{protocol}.lmms_utils" in utils_py
    docs = [json.loads(x) for x in (out / "docs.jsonl").read_text().splitlines()]
    lines = list(ReleaseItem.objects.filter(release=release).order_by("position").values_list("payload", flat=True))
    per_item = {"status": 6, "changeit": 4}.get(protocol, 1)  # the sample ChangeIt items all have a box
    assert len(docs) == per_item * release.item_count
    assert [d["id"] for d in docs[::per_item]] == [line["id"] for line in lines]
    assert [(d["id"], d["query"]) for d in docs] == [(line["id"], q) for line in lines for q in QUERY_KEYS[protocol]]
    for doc in docs:
        for rel in doc["visuals"]:
            assert (out / rel).is_file(), rel
    if protocol == "changeit":  # the box [40, 20, 80, 80] cut out of the stored image
        for line, doc in zip(lines, docs[1::4]):
            with Image.open(out / doc["visuals"][0]) as got:
                want = load_image(out / "media" / line["image"], bbox=line["bbox"], bound=(4096, 4096))
                assert got.size == (80, 80) and got.convert("RGB").tobytes() == want.tobytes()
    assert json.loads((out / "release.json").read_text())["release"]["checksum"] == release.checksum


@pytest.mark.django_db
def test_export_release_lmms_refuses_oscbench_and_needs_a_folder(make_project, tmp_path):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from annotation.importing import items_import
    from annotation.importing.samples import write_sample_dataset
    from annotation.releases import release_freeze

    project = make_project("lm-osc", "oscbench", option_seed=13, settings={})
    items_import(project=project, path=write_sample_dataset(tmp_path / "data", "oscbench", 3), verified=True)
    release_freeze(project=project, version="v1")
    with pytest.raises(CommandError, match="oscbench"):
        call_command("export_release", project.slug, "v1", "--format", "lmms-eval", "-o", str(tmp_path / "t"))
    assert not (tmp_path / "t").exists()
    with pytest.raises(CommandError, match="needs -o DIR"):
        call_command("export_release", project.slug, "v1", "--format", "lmms-eval")


@pytest.mark.parametrize("protocol", SUPPORTED)
def test_the_task_utils_stands_alone(protocol, tmp_path):
    """The folder's utils.py is one file lmms-eval loads without StateLab: it imports the standard
    library and Pillow only, and loads in an isolated interpreter (no project on its path)."""
    source = writer.lmms_task(protocol).utils_source()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"PIL"}, imported
    (tmp_path / "utils.py").write_text(source)
    check = (
        "import utils; assert callable(utils.process_results) and callable(utils.aggregate); print(len(utils.METRICS))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, '.'); {check}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0


def test_a_protocol_part_that_would_not_stand_alone_is_refused(tmp_path):
    part = tmp_path / "lmms_utils.py"
    part.write_text("from protocols.kit.lmms_utils import percent\nfrom protocols.base import LETTERS\n")
    with pytest.raises(LmmsExportError, match="must stand alone"):
        assemble_utils(part, "tests.part")
    part.write_text(
        "from __future__ import annotations\n\nfrom protocols.kit.lmms_utils import (\n    percent,\n)\n\nX = 1\n"
    )
    assert assemble_utils(part, "tests.part") == TEMPLATE.read_text() + (
        "\n\n# --- the protocol's part: tests.part " + "-" * 70 + "\n\nX = 1\n"
    )
