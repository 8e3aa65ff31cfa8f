"""Property-based tests (hypothesis) of whole files imported into PostgreSQL
(annotation.importing.items_import / annotations_import): a file of generated item or rating lines
is imported whole or refused with every message naming its line (or the file) and field, nothing
written; and a valid generated item survives import -> freeze -> export unchanged. Examples are
derandomized and few (each one is a database import). Strategies: tests/helpers/strategies.py."""

from __future__ import annotations

import itertools
import json
import re
import string

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from annotation.importing.formats import CheckedItem, check_item
from annotation.importing.samples import sample_line
from tests.helpers.strategies import answer_text, json_values, near_valid_items, near_valid_ratings

# ---------------------------------------------------------------------------------------------
# Whole files (annotation.importing.items_import / annotations_import) against PostgreSQL

LINE_OR_FILE = re.compile(r"^(line \d+|file|[\w./-]+): field .*: .+", re.S)
DB = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def sample_media(tmp_path_factory):
    """Sample media per protocol, written once for the module (the JSONL files go beside them)."""
    from annotation.importing.samples import write_sample_media

    roots = {}
    for protocol in ("status", "visualtrans"):
        roots[protocol] = tmp_path_factory.mktemp(f"media-{protocol}")
        write_sample_media(roots[protocol], protocol, distinct=4)
    return roots


@pytest.mark.django_db
@pytest.mark.parametrize("protocol", ["status", "visualtrans"])
@DB
@given(data=st.data())
def test_item_file_is_imported_whole_or_refused_naming_line_and_field(protocol, data, make_project, sample_media):
    from annotation.importing import ImportRefused, items_import
    from annotation.models import Item, MediaAsset, Project

    lines = data.draw(
        st.lists(
            near_valid_items(protocol).map(json.dumps) | answer_text | st.builds(json.dumps, json_values),
            min_size=1,
            max_size=4,
        )
    )
    path = sample_media[protocol] / "items.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    project = Project.objects.filter(slug=f"prop-{protocol}").first() or make_project(f"prop-{protocol}", protocol)
    before = (Item.objects.count(), MediaAsset.objects.count())
    try:
        report = items_import(project=project, path=path)
    except ImportRefused as exc:
        assert exc.errors and all(LINE_OR_FILE.match(m) for m in exc.errors), exc.errors
        assert (Item.objects.count(), MediaAsset.objects.count()) == before  # all or nothing
    else:
        assert report is not None


@pytest.mark.django_db
@DB
@given(
    lines=st.lists(
        near_valid_ratings().map(json.dumps) | answer_text | st.builds(json.dumps, json_values), min_size=1, max_size=4
    )
)
def test_rating_file_is_imported_whole_or_refused_naming_line_and_field(lines, make_project, tmp_path_factory):
    from annotation.importing import ImportRefused, annotations_import
    from annotation.models import Annotation, Item, Project

    project = Project.objects.filter(slug="prop-ratings").first()
    if project is None:
        project = make_project("prop-ratings", "oscbench")
        Item.objects.create(project=project, external_id="osc-1", payload=sample_line("oscbench", 1))
    path = tmp_path_factory.mktemp("ratings") / "ratings.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = Annotation.objects.count()
    try:
        annotations_import(project=project, path=path)
    except ImportRefused as exc:
        assert exc.errors and all(LINE_OR_FILE.match(m) for m in exc.errors), exc.errors
        assert Annotation.objects.count() == before


_roundtrips = itertools.count()


@st.composite
def valid_status_lines(draw):
    words = st.text(alphabet=string.ascii_letters + " éü-", min_size=3, max_size=40).filter(lambda s: s.strip())
    line = sample_line("status", draw(st.integers(0, 7)))
    line.update(
        state_a=draw(words),
        state_b=draw(words),
        change=draw(words),
        change_distractors=draw(st.lists(words, min_size=3, max_size=3)),
        difference=draw(st.sampled_from(["slight", "significant"])),
    )
    return line


@pytest.mark.django_db
@DB
@given(line=valid_status_lines())
def test_valid_item_survives_import_freeze_export(line, make_project, sample_media):
    from annotation.importing import items_import
    from annotation.releases import release_freeze, release_lines

    checked = check_item("status", line, verified=True)
    assume(isinstance(checked, CheckedItem))
    path = sample_media["status"] / "roundtrip.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    project = make_project(f"roundtrip-{next(_roundtrips)}", "status")
    items_import(project=project, path=path, verified=True)
    release = release_freeze(project=project, version="v1")
    exported = [row for row in release_lines(release) if row.get("id") == line["id"]]
    assert len(exported) == 1
    for name in ("state_a", "state_b", "change", "change_distractors", "category", "difference"):
        assert exported[0][name] == checked.payload[name]
