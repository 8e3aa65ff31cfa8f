"""A blind QA answer that contradicts itself is refused with a message (docs/architecture.md,
"Contradictory answers"): an option picked beside the flag "no listed option is correct", the
"none of the others" option beside another option or doubled by that flag, a set naming one object
twice; at submit nothing is stored."""

from __future__ import annotations

import pytest

from annotation.models import Annotation, Task, TaskStatus
from annotation.protocols import qa_shape
from annotation.results import QAContext, ResultInvalid, validate_qa
from tests.annotation.work_factories import m3verse_payload, make_item, make_people, visualtrans_payload
from tests.helpers.clients import token_client

NONE_FLAG = "missing_correct_option"


def errors_of(result: dict, ctx: QAContext) -> dict:
    with pytest.raises(ResultInvalid) as refused:
        validate_qa(result, ctx)
    return refused.value.errors


# --- the rule, without an item ------------------------------------------------------------------


def test_an_option_picked_beside_the_no_correct_option_flag_is_refused():
    single = QAContext("choice", n_options=3)
    several = QAContext("choice", n_options=4, multiple=True)

    assert errors_of({"answer": "B", "flags": [NONE_FLAG]}, single) == {
        "answer": "The flag 'no listed option is correct' contradicts the answer B: clear the flag, or leave the "
        "options unpicked."
    }
    assert errors_of({"answer": ["c", "A"], "flags": ["ambiguous", NONE_FLAG]}, several) == {
        "answer": "The flag 'no listed option is correct' contradicts the answer A and C: clear the flag, or leave the "
        "options unpicked."
    }
    # The flag alone says it, and other flags go with any answer.
    assert validate_qa({"answer": None, "flags": [NONE_FLAG]}, single).result == {"answer": None, "flags": [NONE_FLAG]}
    assert validate_qa({"answer": [], "flags": [NONE_FLAG]}, several).result == {"answer": None, "flags": [NONE_FLAG]}
    assert validate_qa({"answer": "B", "flags": ["wrong_ground_truth"]}, single).result == {
        "answer": "B",
        "flags": ["wrong_ground_truth"],
    }


def test_the_none_option_is_the_one_way_where_an_item_lists_it():
    ctx = QAContext("choice", n_options=4, multiple=True, none_option="D")

    assert validate_qa({"answer": ["d"]}, ctx).result == {"answer": ["D"], "flags": []}
    assert validate_qa({"answer": ["A", "C"], "flags": ["ambiguous"]}, ctx).result == {
        "answer": ["A", "C"],
        "flags": ["ambiguous"],
    }
    assert errors_of({"answer": ["A", "D"]}, ctx) == {
        "answer": "Option D says that no listed option is correct, so it cannot go with A."
    }
    assert errors_of({"answer": "D,B,A"}, ctx) == {
        "answer": "Option D says that no listed option is correct, so it cannot go with A and B."
    }
    doubled = (
        "Option D says that no listed option is correct: pick D (alone) instead of the flag "
        "'no listed option is correct'."
    )
    for answer in (None, [], ["D"], ["A"]):
        assert errors_of({"answer": answer, "flags": [NONE_FLAG]}, ctx) == {"answer": doubled}, answer
    # A letter past the item's options is not a "none" option (an option list edited shorter).
    shorter = QAContext("choice", n_options=3, multiple=True, none_option="D")
    assert validate_qa({"answer": None, "flags": [NONE_FLAG]}, shorter).result["flags"] == [NONE_FLAG]


def test_a_set_answer_names_each_object_once_by_the_answer_rule():
    ctx = QAContext("set")

    for answer, twice in (
        (["cup", "cup"], "cup"),
        (["Cup", "bowl", " cup. "], "cup."),
        ("jar, bowl,  JAR", "JAR"),
        (["big  bowl", "big bowl!"], "big bowl!"),
    ):
        assert errors_of({"answer": answer}, ctx) == {"answer": f"'{twice}' is named twice: name each object once."}
    # Articles count under the answer rule: "a cup" is another name than "cup".
    assert validate_qa({"answer": ["cup", "a cup", "bowl"]}, ctx).result == {
        "answer": ["cup", "a cup", "bowl"],
        "flags": [],
    }


def test_count_answers_and_flags_are_unaffected():
    assert validate_qa({"answer": 0, "flags": [NONE_FLAG]}, QAContext("count")).result == {
        "answer": 0,
        "flags": [NONE_FLAG],
    }


# --- the protocol names the "none" option -------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "letter"),
    [
        (["Apple", "Pear", "No correct option is listed."], "C"),
        (["the cup", "the chair", "the lamp", "none of the listed"], "D"),
        (["NONE OF THE ABOVE", "Apple"], "A"),
        (["Apple", "Pear", "Plum"], None),
        (["Apple", "no correct option"], None),
    ],
)
def test_m3verse_answer_shape_names_its_none_option(options, letter):
    shape = qa_shape(protocol="m3verse", payload={"options": options}, project_settings={})
    assert shape == {"format": "choice", "n_options": len(options), "multiple": True, "none_option": letter}
    assert QAContext.of(shape) == QAContext("choice", len(options), True, letter)


def test_visualtrans_items_have_no_none_option():
    shape = qa_shape(protocol="visualtrans", payload=visualtrans_payload(), project_settings={})
    assert QAContext.of(shape) == QAContext("choice", 3, False, None)


def test_the_m3verse_sample_lists_the_authors_none_option():
    from annotation.importing.samples import sample_line

    line = sample_line("m3verse", 0)
    assert line["options"][-1] == "No correct option is listed."
    assert qa_shape(protocol="m3verse", payload=line)["none_option"] == "C"


# --- at submit ----------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("payload", "result", "message"),
    [
        (
            {**visualtrans_payload(), "format": "set", "options": [], "answer": ["knife"]},
            {"answer": ["knife", "Knife."], "flags": []},
            "'Knife.' is named twice: name each object once.",
        ),
        (
            visualtrans_payload(),
            {"answer": "A", "flags": [NONE_FLAG]},
            "The flag 'no listed option is correct' contradicts the answer A: clear the flag, or leave the "
            "options unpicked.",
        ),
    ],
)
def test_a_contradictory_submit_is_refused_and_nothing_is_stored(make_project, payload, result, message):
    (annotator,) = make_people(1)
    project = make_project("vt", "visualtrans", members={annotator: "annotator"})
    make_item(project, payload=payload)
    client = token_client(annotator)
    task = client.post("/api/projects/vt/tasks/next/").json()["task"]

    refused = client.post(f"/api/tasks/{task}/submit/", {"result": result}, format="json")

    assert refused.status_code == 400
    assert refused.json()["errors"] == {"answer": message}
    assert Annotation.objects.count() == 0
    assert Task.objects.get(pk=task).status == TaskStatus.ACTIVE


@pytest.mark.django_db
def test_m3verse_submit_refuses_the_none_option_beside_another(make_project):
    (annotator,) = make_people(1)
    project = make_project("m3", "m3verse", members={annotator: "annotator"})
    make_item(project, payload=m3verse_payload())  # D: "none of the listed"
    client = token_client(annotator)
    task = client.post("/api/projects/m3/tasks/next/").json()["task"]

    refused = client.post(f"/api/tasks/{task}/submit/", {"result": {"answer": ["A", "D"]}}, format="json")

    assert refused.status_code == 400
    assert refused.json()["errors"] == {
        "answer": "Option D says that no listed option is correct, so it cannot go with A."
    }
    assert Annotation.objects.count() == 0
    accepted = client.post(f"/api/tasks/{task}/submit/", {"result": {"answer": ["D"]}}, format="json")
    assert accepted.status_code == 201 and Annotation.objects.get().result == {"answer": ["D"], "flags": []}
