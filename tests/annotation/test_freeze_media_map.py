"""The media map a freeze ends its checksum with: kept in memory while the lines are written when
it names at most ``freezing.MEDIA_MAP_PATHS`` paths, read back from the written release items by
one statement otherwise. Both ways must give the reference freeze's checksum, rows, exports and
refusals (tests/annotation/test_freeze_set_based.py), including a map that outgrows the limit
part-way through the release."""

from __future__ import annotations

import psycopg
import pytest

from annotation import freezing
from annotation.releases import release_freeze

from . import test_freeze_set_based as set_based

# 0: read back from the first path on; 3: kept for the first lines, then read back.
LIMITS = [0, 3]


@pytest.fixture(params=LIMITS, ids=lambda n: f"kept-up-to-{n}")
def small_media_map(request, monkeypatch):
    monkeypatch.setattr(freezing, "MEDIA_MAP_PATHS", request.param)
    return request.param


@pytest.mark.django_db
@pytest.mark.parametrize("protocol", ["status", "changeit", "oscbench"])
def test_read_back_map_freezes_to_the_reference(protocol, small_media_map, make_project, tmp_path):
    set_based.test_every_protocol_freezes_to_the_reference_checksum_rows_and_exports(protocol, make_project, tmp_path)


@pytest.mark.django_db
def test_read_back_map_keeps_code_point_order(small_media_map, make_project, tmp_path):
    set_based.test_many_media_paths_end_the_checksum_in_code_point_order(make_project, tmp_path)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "case",
    ["across items", "within one item", "within an item after one across", "across after one within", "unstored"],
)
def test_read_back_map_refuses_as_the_reference(case, small_media_map, make_project, tmp_path):
    set_based.test_media_refusals_name_what_the_reference_names(case, make_project, tmp_path)


def _statements(monkeypatch) -> list[str]:
    seen: list[str] = []
    real_copy = psycopg.Cursor.copy

    def copy(self, statement, *args, **kwargs):
        seen.append(statement.as_string(self) if hasattr(statement, "as_string") else statement)
        return real_copy(self, statement, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "copy", copy)
    return seen


@pytest.mark.django_db
@pytest.mark.parametrize("limit, read_back", [(0, True), (1000, False)])
def test_the_media_is_read_back_only_past_the_limit(limit, read_back, make_project, tmp_path, monkeypatch):
    project = set_based.verified_project(make_project, tmp_path, "status", n=12)
    monkeypatch.setattr(freezing, "MEDIA_MAP_PATHS", limit)
    statements = _statements(monkeypatch)

    release = release_freeze(project=project, version="v1")

    media_reads = [s for s in statements if "jsonb_each_text" in s]
    assert len(media_reads) == (1 if read_back else 0)
    assert release.checksum == set_based.documented_checksum(release)
