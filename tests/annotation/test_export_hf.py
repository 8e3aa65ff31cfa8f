"""A release as a Hugging Face dataset folder: `datasets.load_dataset(DIR)` loads it as is (images
as the Image feature, videos as files next to the shards, typed columns, the card's metadata),
and `import_items` reads the folder back losslessly: re-frozen, the copy has the same checksum."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import Item, Project, ReleaseItem
from annotation.protocols import MEDIA_FIELDS
from annotation.releases import release_freeze

pytestmark = pytest.mark.django_db

PROTOCOLS = ["status", "changeit", "visualtrans", "m3verse", "oscbench"]


@pytest.fixture(autouse=True)
def _offline_hf_cache(tmp_path, monkeypatch):
    # The datasets library caches what it loads; keep it in the test's folder and off the network.
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def frozen(make_project, tmp_path, protocol, n=5, **settings):
    project = make_project(f"src-{protocol}", protocol, option_seed=13, settings=settings or {})
    items_import(project=project, path=write_sample_dataset(tmp_path / f"data-{protocol}", protocol, n), verified=True)
    return release_freeze(project=project, version="v1")


def media_digests(project: Project) -> list[str]:
    shas = set()
    for media in Item.objects.filter(project=project).values_list("media", flat=True):
        for value in media.values():
            shas.update(value if isinstance(value, list) else [value])
    return sorted(shas)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_hf_folder_loads_in_datasets_and_imports_back_losslessly(protocol, make_project, tmp_path):
    datasets = pytest.importorskip("datasets")
    release = frozen(make_project, tmp_path, protocol)
    out = tmp_path / "hf"
    call_command("export_release", release.project.slug, "v1", "--format", "hf", "-o", str(out))

    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))
    split = loaded["test"]
    assert split.num_rows == release.item_count == 5
    features = split.features
    for name, kind in MEDIA_FIELDS[protocol].items():
        feature = features[name]
        if kind == "image":
            inner = getattr(feature, "feature", feature)
            assert type(inner).__name__ == "Image", (name, feature)
            first = split[0][name]
            image = first[0] if isinstance(first, list) else first
            assert image.size[0] > 0  # decoded by datasets
        else:
            value = split[0][name]
            paths = value if isinstance(value, list) else [value]
            assert all((out / p).is_file() for p in paths)
    assert split[0]["id"] == f"{protocol}-00000"
    card = (out / "README.md").read_text()
    assert f'"checksum": "{release.checksum}"' in card and f'"item_count": {release.item_count}' in card

    call_command("import_items", "copy", str(out), "--create", "--verified")
    copy = Project.objects.get(slug="copy")
    assert copy.protocol == protocol and copy.option_seed == release.project.option_seed
    again = release_freeze(project=copy, version="v1")
    assert again.checksum == release.checksum
    assert media_digests(copy) == media_digests(release.project)


def dealt_to_splits(make_project, tmp_path, splits, per_split=2):
    """One project whose items are dealt to `splits` in turn, and a release of each split (v1, v2, ...)."""
    project = make_project("src-splits", "status", option_seed=13)
    path = write_sample_dataset(tmp_path / "data-splits", "status", per_split * len(splits))
    items_import(project=project, path=path, verified=True)
    pks = list(Item.objects.filter(project=project).order_by("external_id").values_list("pk", flat=True))
    for i, split in enumerate(splits):
        Item.objects.filter(pk__in=pks[i :: len(splits)]).update(split=split)
    return [release_freeze(project=project, version=f"v{i + 1}", split=split) for i, split in enumerate(splits)]


def card_meta(folder) -> dict:
    card = (folder / "README.md").read_text()
    return json.loads(next(line for line in card.splitlines() if line.startswith("statelab: "))[len("statelab: ") :])


# `datasets` takes split names matching ^\w+(\.\w+)*$ other than `all`; a StateLab split may hold
# `-` and dots anywhere, and may be `all`.
@pytest.mark.parametrize(("split", "hf_split"), [("val-hard", "val_hard"), ("..", "__"), ("All", "All_")])
def test_a_split_datasets_refuses_loads_renamed_and_imports_back_under_its_own_name(
    split, hf_split, make_project, tmp_path
):
    datasets = pytest.importorskip("datasets")
    (release,) = dealt_to_splits(make_project, tmp_path, [split], per_split=3)
    out = tmp_path / "hf"
    call_command("export_release", release.project.slug, "v1", "--format", "hf", "-o", str(out))

    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))
    assert list(loaded) == [hf_split] and loaded[hf_split].num_rows == 3
    assert loaded[hf_split]["split"] == [split] * 3
    assert [p.name for p in (out / "data").iterdir()] == [f"{hf_split}-00000-of-00001.parquet"]
    assert card_meta(out)["split"] == split and card_meta(out)["hf_split"] == hf_split
    card = (out / "README.md").read_text()
    assert f"split `{split}` (the Hugging Face split `{hf_split}`)" in card

    call_command("import_items", "copy", str(out), "--create", "--verified")
    copy = Project.objects.get(slug="copy")
    assert set(copy.items.values_list("split", flat=True)) == {split}
    assert release_freeze(project=copy, version="v1", split=split).checksum == release.checksum


def test_splits_that_datasets_would_name_alike_stay_apart_on_import(make_project, tmp_path):
    # `a-b` and `a_b` both load as `a_b`; each release is its own folder, and its rows and card
    # keep the StateLab split, so the two come back distinct.
    datasets = pytest.importorskip("datasets")
    releases = dealt_to_splits(make_project, tmp_path, ["a-b", "a_b", "test"])
    for release, hf_split in zip(releases, ["a_b", "a_b", "test"]):
        out = tmp_path / f"hf-{release.version}"
        call_command("export_release", release.project.slug, release.version, "--format", "hf", "-o", str(out))
        loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))
        assert list(loaded) == [hf_split] and loaded[hf_split]["split"] == [release.split] * 2
        assert ("the Hugging Face split" in (out / "README.md").read_text()) == (release.split == "a-b")
        call_command("import_items", "copy", str(out), "--verified", *(["--create"] if release.version == "v1" else []))

    copy = Project.objects.get(slug="copy")
    for release in releases:
        assert copy.items.filter(split=release.split).count() == 2
        assert release_freeze(project=copy, version=release.version, split=release.split).checksum == release.checksum


def test_typed_columns_license_and_citation_in_the_card(make_project, tmp_path):
    datasets = pytest.importorskip("datasets")
    release = frozen(
        make_project,
        tmp_path,
        "visualtrans",
        n=6,
        license="cc-by-4.0",
        citation="@inproceedings{vt, title={VisualTrans}}",
    )
    out = tmp_path / "hf"
    call_command("export_release", release.project.slug, "v1", "--format", "hf", "-o", str(out))
    card = (out / "README.md").read_text()
    assert card.startswith('---\nlicense: "cc-by-4.0"\n')
    assert "@inproceedings{vt, title={VisualTrans}}" in card
    split = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))["test"]
    features = split.features
    assert features["question"].dtype == "string"
    # Answers are letters, numbers or lists depending on the question: one JSON text column.
    assert features["answer"].dtype == "string"
    meta = card_meta(out)
    assert "answer" in meta["json_columns"] and "resolved" in meta["json_columns"]
    lines = list(ReleaseItem.objects.filter(release=release).order_by("position").values_list("payload", flat=True))
    assert [json.loads(a) for a in split["answer"]] == [line["answer"] for line in lines]
    assert split["id"] == [line["id"] for line in lines]


def test_a_damaged_folder_is_refused_and_nothing_written(make_project, tmp_path):
    release = frozen(make_project, tmp_path, "status")
    out = tmp_path / "hf"
    call_command("export_release", release.project.slug, "v1", "--format", "hf", "-o", str(out))
    shard = next((out / "data").glob("*.parquet"))
    shard.write_bytes(shard.read_bytes()[:200])
    before = Item.objects.count()
    with pytest.raises(CommandError, match="not a readable Parquet file"):
        call_command("import_items", "copy2", str(out), "--create", "--verified")
    assert Item.objects.count() == before and not Project.objects.filter(slug="copy2").exists()
    with pytest.raises(CommandError, match="not empty"):
        call_command("export_release", release.project.slug, "v1", "--format", "hf", "-o", str(out))


def test_hf_download_from_the_api_is_the_folder_zipped(make_project, make_user, tmp_path):
    datasets = pytest.importorskip("datasets")
    import io
    import zipfile

    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from annotation.models import Membership, Role

    release = frozen(make_project, tmp_path, "oscbench", n=3)
    res = make_user("res")
    Membership.objects.create(project=release.project, user=res, role=Role.RESEARCHER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=res).key}")
    response = client.get(f"/api/projects/{release.project.slug}/releases/v1/export/?fmt=hf")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == f'attachment; filename="{release.project.slug}-v1.hf.zip"'
    folder = tmp_path / "unzipped"
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as zf:
        assert "README.md" in zf.namelist() and any(n.startswith("media/") for n in zf.namelist())
        zf.extractall(folder)
    split = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf-cache"))["test"]
    assert split.num_rows == 3 and all((folder / p).is_file() for p in split["video"])


def test_push_to_hub_needs_the_hf_format_and_a_token(make_project, tmp_path, monkeypatch):
    # No network here: only the refusals are exercised (the upload itself is huggingface_hub's).
    release = frozen(make_project, tmp_path, "status", n=2)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(CommandError, match="needs --format hf"):
        call_command(
            "export_release", release.project.slug, "v1", "-o", str(tmp_path / "x.json"), "--push-to-hub", "me/ds"
        )
    with pytest.raises(CommandError, match="HF_TOKEN"):
        call_command(
            "export_release",
            release.project.slug,
            "v1",
            "--format",
            "hf",
            "-o",
            str(tmp_path / "hf"),
            "--push-to-hub",
            "me/ds",
        )
    assert (tmp_path / "hf" / "README.md").is_file()
