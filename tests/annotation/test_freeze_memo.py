"""What the freeze keeps from one line for the next (annotation/freezing.py): tags decoded once per
distinct text and the media column made once per distinct (media text, media field values), at
most ``freezing.DECODED_KEPT`` of each. However small the memo (1: made again for nearly every
line; 2: cleared part-way), the release must be the reference freeze's to the byte — checksum,
rows, every export — and refuse what it refuses (tests/annotation/test_freeze_set_based.py)."""

from __future__ import annotations

import pytest

from annotation import freezing
from annotation.models import Item, MediaAsset
from annotation.releases import release_freeze
from tests.annotation.freeze_reference import reference_freeze

from . import test_freeze_set_based as set_based


@pytest.fixture(params=[1, 2, freezing.DECODED_KEPT], ids=lambda n: f"kept-{n}")
def memo_size(request, monkeypatch):
    monkeypatch.setattr(freezing, "DECODED_KEPT", request.param)
    return request.param


@pytest.mark.django_db
@pytest.mark.parametrize("protocol", set_based.PROTOCOLS)
def test_any_memo_size_freezes_to_the_reference(protocol, memo_size, make_project, tmp_path):
    set_based.test_every_protocol_freezes_to_the_reference_checksum_rows_and_exports(protocol, make_project, tmp_path)


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["within one item", "across items", "unstored"])
def test_refusal_found_by_a_remembered_media_column(case, memo_size, make_project, tmp_path):
    """The same media on several items (so later ones take the remembered column): the refusal is
    still the reference's, whichever of them carries the fault."""
    project = set_based.verified_project(make_project, tmp_path, "status", n=8)
    items = list(Item.objects.filter(project=project).order_by("external_id"))
    one, other = list(MediaAsset.objects.values_list("sha256", flat=True))[:2]
    same = {"image_a": ("img/shared.png", one), "image_b": ("img/other.png", other)}
    for k in (1, 3, 4, 6):
        set_based.set_media(items[k], same)
    if case == "within one item":
        for k in (2, 5):
            set_based.set_media(items[k], {"image_a": ("img/twice.png", one), "image_b": ("img/twice.png", other)})
    elif case == "across items":
        set_based.set_media(items[5], {"image_a": ("img/shared.png", other), "image_b": ("img/x.png", one)})
    else:
        for k in (2, 7):
            set_based.set_media(items[k], {"image_a": ("img/gone.png", "f" * 64), "image_b": ("img/o.png", other)})

    expected = set_based.refusal(reference_freeze, project)
    got = set_based.refusal(release_freeze, project)

    assert got == expected
    assert got.startswith("media: ")


@pytest.mark.django_db
def test_shared_media_freezes_to_the_reference(memo_size, make_project, tmp_path):
    """Most lines remembered: every item names the same two files."""
    project = set_based.verified_project(make_project, tmp_path, "status", n=10)
    one, other = list(MediaAsset.objects.values_list("sha256", flat=True))[:2]
    for item in Item.objects.filter(project=project):
        set_based.set_media(item, {"image_a": ("img/a.png", one), "image_b": ("img/b.png", other)})

    set_based.freeze_and_compare(project, tmp_path)
