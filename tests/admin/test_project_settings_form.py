"""The admin's project form checks every key of Project.settings by the rule of the code that reads
it (project_setup.SETTING_RULES): each bad value is refused with an error naming its key and nothing
is saved; a good one is stored in the form its reader uses; a key nothing reads, or that the
project's protocol does not read, is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from annotation.models import AuditEvent, Project
from annotation.project_setup import SETTING_RULES
from annotation.protocols import qa_shape
from annotation.queue.rules import lease_seconds
from annotation.selectors import box_candidates, rubric_for, rubric_text_for, shows_suggestions
from tests.helpers.admin import admin_save

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
STORED = {"gold_share": 0.1}  # what every project below holds before the save


@pytest.fixture
def root(make_user):
    client = Client()
    client.force_login(make_user("root", superuser=True))
    return client


QUINTUPLET_ETC = "Only STATUS Bench (quintuplets), VisualTrans (image QA), M3-Verse (video-pair QA) projects read it."
NO_KEY = (
    "Not a project setting; the settings are gold_share, lease_seconds, auto_verify, suggestions, rubric, "
    "state_labels, multiple, disagreement, license, citation, annotator_cap, arena_excluded_raters, "
    "arena_min_view_seconds."
)


@pytest.mark.parametrize(
    "protocol, typed, errors",
    [
        ("status", {"gold_share": 1.5}, ["gold_share: A share from 0 to 1 (e.g. 0.1 for one claim in ten)."]),
        ("status", {"gold_share": "often"}, ["gold_share: A share from 0 to 1 (e.g. 0.1 for one claim in ten)."]),
        ("status", {"gold_share": True}, ["gold_share: A share from 0 to 1 (e.g. 0.1 for one claim in ten)."]),
        ("status", {"lease_seconds": 30}, ["lease_seconds: A whole number from 60 to 86400."]),
        ("status", {"lease_seconds": "ten minutes"}, ["lease_seconds: A whole number from 60 to 86400."]),
        ("status", {"lease_seconds": 600.5}, ["lease_seconds: A whole number from 60 to 86400."]),
        ("status", {"auto_verify": "maybe"}, ["auto_verify: true or false."]),
        ("status", {"auto_verify": 1}, ["auto_verify: true or false."]),
        ("visualtrans", {"suggestions": "sometimes"}, ["suggestions: true or false."]),
        ("oscbench", {"suggestions": False}, [f"suggestions: {QUINTUPLET_ETC}"]),
        ("changeit", {"suggestions": False}, [f"suggestions: {QUINTUPLET_ETC}"]),
        ("status", {"rubric": "1 = bad"}, ["rubric: Only OSCBench (video rating) projects read it."]),
        (
            "oscbench",
            {"rubric": "  "},
            ["rubric: One text, or criterion -> text; leave the rubric out for the default."],
        ),
        ("oscbench", {"rubric": "x" * 5001}, ["rubric: At most 5000 characters."]),
        (
            "oscbench",
            {"rubric": ["1 = bad"]},
            [
                "rubric: One text, or criterion -> text with criteria from: subject, object, "
                "action, osc_accuracy, osc_consistency, scene, realism, aesthetics."
            ],
        ),
        (
            "oscbench",
            {"rubric": {"beauty": "x"}},
            [
                "rubric: beauty: not a rating criterion. One text, or criterion -> text "
                "with criteria from: subject, object, action, osc_accuracy, "
                "osc_consistency, scene, realism, aesthetics."
            ],
        ),
        ("oscbench", {"rubric": {"realism": 3}}, ["rubric: realism: A text; leave the criterion out for its default."]),
        (
            "status",
            {"state_labels": {"apple": ["rotten apple"]}},
            ["state_labels: Only ChangeIt-Frames (boxes + state) projects read it."],
        ),
        (
            "changeit",
            {"state_labels": ["rotten apple"]},
            ['state_labels: Object name -> list of state labels, e.g. {"apple": ["sliced apple"]}.'],
        ),
        (
            "changeit",
            {"state_labels": {"apple": "rotten apple"}},
            ["state_labels: apple: a list of one or more state labels."],
        ),
        (
            "changeit",
            {"state_labels": {"apple": ["rotten apple", ""]}},
            ["state_labels: apple: A state label is a non-empty text."],
        ),
        ("changeit", {"state_labels": {" ": ["rotten"]}}, ["state_labels: An object name is empty."]),
        ("m3verse", {"multiple": "several"}, ["multiple: true or false."]),
        ("visualtrans", {"multiple": True}, ["multiple: Only M3-Verse (video-pair QA) projects read it."]),
        ("status", {"license": 4}, ['license: A license identifier such as cc-by-4.0; leave it out for "other".']),
        ("status", {"license": "mit\nlicense: evil"}, ["license: One line."]),
        ("status", {"license": "x" * 101}, ["license: At most 100 characters."]),
        ("status", {"citation": ["@article{x}"]}, ["citation: A text (BibTeX); leave it out for none."]),
        (
            "visualtrans",
            {"disagreement": {"box_iou": 0.4}},
            ["disagreement.box_iou: Not a threshold of Blind QA verification projects."],
        ),
        ("status", {"colour": "red"}, [f"colour: {NO_KEY}"]),
        # Every bad key named, in the order typed.
        (
            "changeit",
            {"lease_seconds": 5, "gold": 0.1, "state_labels": {}, "rubric": "x"},
            [
                "lease_seconds: A whole number from 60 to 86400.",
                f"gold: {NO_KEY}",
                'state_labels: Object name -> list of state labels, e.g. {"apple": ["sliced apple"]}.',
                "rubric: Only OSCBench (video rating) projects read it.",
            ],
        ),
    ],
)
def test_the_admin_refuses_each_bad_setting_by_its_key_and_saves_nothing(root, make_project, protocol, typed, errors):
    project = make_project("lab", protocol, settings=dict(STORED))

    r = admin_save(root, project, {**STORED, **typed})

    assert r.status_code == 200  # the form again, with the errors
    assert r.context["adminform"].form.errors["settings"] == errors
    assert Project.objects.get(pk=project.pk).settings == STORED
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    "protocol, typed, stored",
    [
        (
            "status",
            {
                "gold_share": "0.25",
                "lease_seconds": "900",
                "auto_verify": True,
                "suggestions": False,
                "license": " cc-by-4.0 ",
                "citation": "@article{x, title={X}}\n",
                "disagreement": {"quintuplet_fields": ["change", "state_a"]},
            },
            {
                "gold_share": 0.25,
                "lease_seconds": 900,
                "auto_verify": True,
                "suggestions": False,
                "license": "cc-by-4.0",
                "citation": "@article{x, title={X}}",
                "disagreement": {"quintuplet_fields": ["state_a", "change"]},
            },
        ),
        (
            "status",
            {"gold_share": 0, "lease_seconds": 86400.0, "auto_verify": False, "suggestions": True},
            {"gold_share": 0.0, "lease_seconds": 86400, "auto_verify": False, "suggestions": True},
        ),
        ("oscbench", {"rubric": " 1 = bad, 5 = excellent "}, {"rubric": "1 = bad, 5 = excellent"}),
        (
            "oscbench",
            {"rubric": {"realism": " Own wording. ", "scene": "Where."}, "disagreement": {"rating_spread": "3"}},
            {"rubric": {"scene": "Where.", "realism": "Own wording."}, "disagreement": {"rating_spread": 3}},
        ),
        (
            "changeit",
            {"state_labels": {"apple": ["rotten apple", " rotten apple", "sliced apple"]}},
            {"state_labels": {"apple": ["rotten apple", "sliced apple"]}},
        ),
        ("m3verse", {"multiple": False, "suggestions": False}, {"multiple": False, "suggestions": False}),
        ("visualtrans", {"disagreement": {}}, {"disagreement": {}}),
    ],
)
def test_the_admin_stores_good_settings_in_their_clean_form(root, make_project, protocol, typed, stored):
    project = make_project("lab", protocol)

    assert admin_save(root, project, typed).status_code == 302

    assert Project.objects.get(pk=project.pk).settings == stored


def test_what_the_admin_stores_is_what_the_readers_use(root, make_project):
    """Through the readers, each value is used as set (not as its default)."""
    boxes, ratings, video_qa = (
        make_project(slug, protocol)
        for slug, protocol in (("boxes", "changeit"), ("ratings", "oscbench"), ("vqa", "m3verse"))
    )
    assert (
        admin_save(root, boxes, {"lease_seconds": "900", "state_labels": {"apple": [" rotten apple "]}}).status_code
        == 302
    )
    assert admin_save(root, ratings, {"rubric": {"realism": " Own. "}}).status_code == 302
    assert admin_save(root, video_qa, {"multiple": False, "suggestions": "false"}).status_code == 302
    boxes, ratings, video_qa = (Project.objects.get(pk=p.pk) for p in (boxes, ratings, video_qa))

    assert lease_seconds(boxes) == 900
    assert box_candidates(project=boxes, payload={"object": "apple", "state": "peeled apple"}) == [
        "peeled apple",
        "rotten apple",
    ]
    assert (rubric_for(project=ratings)["realism"], rubric_text_for(project=ratings)) == ("Own.", None)
    assert (
        qa_shape(protocol="m3verse", payload={"options": ["a", "b"]}, project_settings=video_qa.settings)["multiple"]
        is False
    )
    assert shows_suggestions(project=video_qa) is False


def test_every_key_the_code_reads_has_a_rule():
    """A settings key read anywhere in annotation/, inference/, evaluation/ or protocols/
    (settings.get("k"), settings["k"], and project_setting(settings, "k", ...), which reads it
    through its rule) has its check in SETTING_RULES, and every rule's key is read somewhere."""
    pattern = re.compile(r"""settings(?: or \{\})?\)?(?:\.get\(\s*|\[)["'](\w+)["']""")
    through_rule = re.compile(r"""project_setting\([\w.]+,\s*["'](\w+)["']""")
    read, ruled = set(), set()
    for app in ("annotation", "inference", "evaluation", "protocols"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts:
                read |= set(pattern.findall(path.read_text()))
                ruled |= set(through_rule.findall(path.read_text()))
    assert {"gold_share", "lease_seconds", "rubric", "citation", "license"} <= ruled  # the scan finds the readers
    read |= ruled
    assert read == set(SETTING_RULES)


@pytest.mark.parametrize(
    "typed, settings_errors",
    [
        ({"rubric": "1 = bad"}, None),  # checked against the protocol once there is one
        ([1], ['Workflow settings are one JSON object, e.g. {"auto_verify": true}.']),
    ],
)
def test_a_bad_protocol_is_named_and_the_settings_wait_for_a_good_one(root, make_project, typed, settings_errors):
    project = make_project("lab", "oscbench", settings={"rubric": "1 = bad"})
    project.protocol = "nope"

    r = admin_save(root, project, typed)

    errors = r.context["adminform"].form.errors
    assert r.status_code == 200 and list(errors["protocol"])[0].startswith("Select a valid choice.")
    assert errors.get("settings") == settings_errors
    assert Project.objects.get(pk=project.pk).protocol == "oscbench"
