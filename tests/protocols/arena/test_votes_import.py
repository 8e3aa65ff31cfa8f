"""Votes made elsewhere, imported through the annotation importer (protocols/arena/formats.py and
the arena form's line check): one annotation per (item, rater), per-criterion votes merged, every
bad line refused with its line and value, and nothing written then."""

from __future__ import annotations

import json

import pytest

from annotation.importing import ImportRefused, annotations_import
from annotation.models import Annotation, ItemStatus

from .helpers import clips, make_pair

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(settings, tmp_path, make_project):
    settings.MEDIA_ROOT = tmp_path / "media"
    project = make_project("votes", "arena", annotations_per_item=2)
    media = clips(tmp_path)
    for i in range(3):
        make_pair(project, f"p{i}", media)
    return project


def write(tmp_path, lines, name="votes.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_votes_merge_per_item_and_rater(project, tmp_path):
    path = write(
        tmp_path,
        [
            {"item": "p0", "rater": "r1", "winner": "a"},
            {"item": "p0", "rater": "r1", "winner": "tie", "criterion": "state_change"},
            {"item": "p0", "rater": "r2", "winner": "both_bad", "criterion": "overall"},
            {"item": "p1", "rater": "r1", "winner": "b"},
        ],
    )
    report = annotations_import(project=project, path=path)
    assert report.format == "arena-votes" and report.created == 3
    got = {
        (a.item.external_id, a.external_rater): a.result
        for a in Annotation.objects.filter(item__project=project).select_related("item")
    }
    assert got == {
        ("p0", "r1"): {"winner": "a", "criteria": {"state_change": "tie"}},
        ("p0", "r2"): {"winner": "both_bad"},
        ("p1", "r1"): {"winner": "b"},
    }
    # Two annotations were what p0 needed.
    assert project.items.get(external_id="p0").status == ItemStatus.ANNOTATED
    # The same file again changes nothing.
    again = annotations_import(project=project, path=path)
    assert again.created == 0 and again.unchanged == 3


@pytest.mark.parametrize(
    "bad, found",
    [
        ({"item": "p0", "rater": "r1", "winner": "left"}, "line 2: winner 'left' is not one of a, b, tie, both_bad"),
        ({"item": "p0", "rater": "r1", "winner": "a", "criterion": "colour"}, "criterion 'colour' is not one of"),
        ({"item": "p0", "rater": "r9", "winner": "a", "side": "x"}, "line 2: unknown field side"),
    ],
)
def test_a_bad_vote_is_refused_naming_it_and_nothing_is_written(project, tmp_path, bad, found):
    path = write(tmp_path, [{"item": "p1", "rater": "r1", "winner": "a"}, bad])
    with pytest.raises(ImportRefused) as refused:
        annotations_import(project=project, path=path)
    assert any(found in error for error in refused.value.errors), refused.value.errors
    assert Annotation.objects.count() == 0


def test_contradicting_votes_and_an_unknown_item_are_refused(project, tmp_path):
    path = write(
        tmp_path,
        [{"item": "p0", "rater": "r1", "winner": "a"}, {"item": "p0", "rater": "r1", "winner": "b"}],
    )
    with pytest.raises(ImportRefused) as refused:
        annotations_import(project=project, path=path)
    assert "voted 'b' on item 'p0' (overall), but 'a' on line 1" in " ".join(refused.value.errors)
    path = write(tmp_path, [{"item": "nope", "rater": "r1", "winner": "a"}])
    with pytest.raises(ImportRefused) as refused:
        annotations_import(project=project, path=path)
    assert "no item 'nope' in project votes" in " ".join(refused.value.errors)
    assert Annotation.objects.count() == 0


def test_a_vote_already_in_the_stored_shape_passes_as_it_is(project, tmp_path):
    path = write(tmp_path, [{"item": "p2", "rater": "r1", "winner": "b", "criteria": {"state_change": "a"}}])
    annotations_import(project=project, path=path)
    assert Annotation.objects.get().result == {"winner": "b", "criteria": {"state_change": "a"}}


def test_an_imported_vote_may_not_claim_a_side_shown(project, tmp_path):
    path = write(tmp_path, [{"item": "p2", "rater": "r1", "winner": "b"}])
    from protocols import registry
    from protocols.arena import workflow

    ctx = workflow.context(registry.get("arena"), {})
    errors = workflow.check_line({"item": "p2", "rater": "r1", "winner": "b", "shown": "ab"}, ctx)
    assert [e.field for e in errors] == ["shown"]
    assert annotations_import(project=project, path=path).created == 1
