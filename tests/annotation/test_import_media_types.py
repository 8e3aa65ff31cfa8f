"""Media that can never run, on the import side (docs/architecture.md, "Invariants"): the stored extension comes from
what a file is (Pillow's format, the probed container) on an allow-list, never from its name. A
valid PNG named poly.html is stored as .png; an MP4 named v.html goes through the container check
and is stored as .mp4; a video in a container on no list is refused whatever its name."""

from __future__ import annotations

import io
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from annotation.importing import ImportRefused, items_import
from annotation.importing.samples import make_image, make_video, sample_line
from annotation.media.probe import ffmpeg_exe
from annotation.models import MediaAsset, Role
from tests.helpers.files import polyglot_png, write_lines

pytestmark = pytest.mark.django_db


def stored(media_root: Path) -> list[str]:
    return sorted(p.relative_to(media_root).as_posix() for p in media_root.rglob("*") if p.is_file())


def box_line(image: str) -> dict:
    return {"id": "b1", "image": image, "object": "apple", "state": "whole apple"}


def osc_line(video: str) -> dict:
    return sample_line("oscbench", 1, media={"video": video})


def image_bytes(fmt: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 6), "blue").save(out, fmt)
    return out.getvalue()


@pytest.mark.parametrize(
    "name,content,ext,mime",
    [
        ("poly.html", polyglot_png(), ".png", "image/png"),
        ("poly.htm", polyglot_png(), ".png", "image/png"),
        ("pic.svg", image_bytes("GIF"), ".gif", "image/gif"),
        ("pic.js", image_bytes("JPEG"), ".jpg", "image/jpeg"),
        ("pic.png", image_bytes("JPEG"), ".jpg", "image/jpeg"),  # the name lies about the format
        ("pic.jpeg", image_bytes("JPEG"), ".jpeg", "image/jpeg"),  # one of the format's own names: kept
        ("noext", image_bytes("WEBP"), ".webp", "image/webp"),
    ],
    ids=lambda v: v if isinstance(v, str) and not v.startswith(".") and "/" not in v else "",
)
def test_an_image_is_stored_under_the_extension_of_its_format(
    make_project, tmp_path, _media_root, name, content, ext, mime
):
    project = make_project("boxes", "changeit")
    (tmp_path / name).write_bytes(content)

    items_import(project=project, path=write_lines(tmp_path / "items.jsonl", [box_line(name)]))

    asset = MediaAsset.objects.get()
    assert Path(asset.file.name).suffix == ext and asset.mime == mime
    assert stored(_media_root) == [f"assets/{asset.sha256[:2]}/{asset.sha256}{ext}"]
    assert (_media_root / asset.file.name).read_bytes() == content


def test_an_imported_polyglot_named_html_is_served_as_a_png(make_project, make_user, client, tmp_path):
    user = make_user("ann")
    project = make_project("boxes", "changeit", members={user: Role.ANNOTATOR})
    (tmp_path / "poly.html").write_bytes(polyglot_png())
    items_import(project=project, path=write_lines(tmp_path / "items.jsonl", [box_line("poly.html")]))
    client.force_login(user)

    response = client.get(f"/media/{MediaAsset.objects.get().file.name}")

    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert not MediaAsset.objects.filter(file__endswith=".html").exists()


def test_an_mp4_named_html_goes_through_the_container_check_and_is_stored_as_mp4(make_project, tmp_path, _media_root):
    project = make_project("osc", "oscbench")
    make_video(tmp_path / "clip.mp4", 1)
    (tmp_path / "clip.mp4").rename(tmp_path / "v.html")

    items_import(project=project, path=write_lines(tmp_path / "items.jsonl", [osc_line("v.html")]))

    asset = MediaAsset.objects.get()
    assert (Path(asset.file.name).suffix, asset.mime, asset.kind) == (".mp4", "video/mp4", "video")
    assert stored(_media_root) == [f"assets/{asset.sha256[:2]}/{asset.sha256}.mp4"]


def test_a_zipped_mp4_named_html_is_stored_as_mp4(make_project, tmp_path, _media_root):
    project = make_project("osc", "oscbench")
    make_video(tmp_path / "clip.mp4", 2)
    archive = tmp_path / "upload.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(tmp_path / "clip.mp4", "media/v.html")
        zf.writestr("items.jsonl", json.dumps(osc_line("media/v.html")) + "\n")

    items_import(project=project, path=archive)

    assert Path(MediaAsset.objects.get().file.name).suffix == ".mp4"


def flv(path: Path) -> Path:
    """The same clip in Flash Video, a container on no allow-list."""
    source = make_video(path.with_suffix(".mp4"), 1)
    proc = subprocess.run(
        [ffmpeg_exe(), "-y", "-v", "error", "-i", str(source), "-c:v", "flv", "-f", "flv", str(path)],
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stderr[-300:]
    source.unlink()
    return path


def test_a_video_in_a_container_on_no_list_is_refused_whatever_its_name(make_project, tmp_path, _media_root):
    project = make_project("osc", "oscbench")
    flv(tmp_path / "v.html")

    with pytest.raises(ImportRefused) as refused:
        items_import(project=project, path=write_lines(tmp_path / "items.jsonl", [osc_line("v.html")]))

    [message] = refused.value.errors
    assert message.startswith("line 1: field video: v.html: container flv is not an allowed video format (")
    assert stored(_media_root) == [] and not MediaAsset.objects.exists()


def test_text_named_html_used_as_a_video_is_refused(make_project, tmp_path, _media_root):
    project = make_project("osc", "oscbench")
    (tmp_path / "v.html").write_text("<script>alert(1)</script>\n" * 50)

    with pytest.raises(ImportRefused) as refused:
        items_import(project=project, path=write_lines(tmp_path / "items.jsonl", [osc_line("v.html")]))

    assert refused.value.errors[0].startswith("line 1: field video: v.html: not a readable video (")
    assert stored(_media_root) == []


def test_a_png_named_html_used_as_a_video_is_refused_as_a_still_image(make_project, tmp_path, _media_root):
    project = make_project("osc", "oscbench")
    make_image(tmp_path / "x.png", 0, 1)
    (tmp_path / "x.png").rename(tmp_path / "v.html")

    with pytest.raises(ImportRefused) as refused:
        items_import(project=project, path=write_lines(tmp_path / "items.jsonl", [osc_line("v.html")]))

    assert refused.value.errors == ["line 1: field video: v.html: is a still image (png_pipe), not a video"]
