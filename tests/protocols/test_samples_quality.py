"""The demo's sample data looks like a real study (protocols/kit/samples.py): every board has
enough verified items and several made-up models whose scores differ in the order of their skill,
above or at the Random row; the OSCBench raters mostly agree (ordinal Krippendorff's α well above 0
on every criterion), the generators differ, and both judges track the humans, the careful one
more closely. Computed on the very lines the demo command imports, without a database."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import pytest

from annotation.importing.samples import sample_line
from annotation.reliability import krippendorff_alpha
from evaluation.scoring.answer_sets import ModelAnswer, ScoringItem, random_answers, score
from evaluation.stats import kendall_tau_b
from protocols import registry
from protocols.kit.answers import parse_answer
from protocols.kit.samples import DEMO_MODELS, DEMO_VERIFIED

SEED = 2024  # the demo projects' option seed (annotation/management/commands/demo.py)
QA_BOARDS = ["status", "changeit", "visualtrans", "m3verse"]


def release_lines(protocol: str) -> list[dict]:
    """The demo's verified sample lines with their resolved queries, as release v1 exports them."""
    proto = registry.get(protocol)
    lines = [sample_line(protocol, i) for i in proto.samples.DEMO.files["verified.jsonl"][0]]
    vocabulary = proto.vocabulary(lines)
    for line in lines:
        line["resolved"] = proto.resolve_queries(line["id"], line, seed=SEED, vocabulary=vocabulary)
    return lines


def board(protocol: str) -> dict[str, Decimal]:
    """Each made-up model's headline figure (and the Random row's) on the demo's release."""
    lines = release_lines(protocol)
    by_id = {line["id"]: line for line in lines}
    items = [ScoringItem(key=i, external_id=i, payload=line, resolved=line["resolved"]) for i, line in by_id.items()]
    headline = registry.get(protocol).ranking[0]
    figures = {}
    for model, predictions in registry.get(protocol).samples.demo_predictions(lines).items():
        answers = {}
        for p in predictions:
            spec = by_id[p["item"]]["resolved"][p["query"]]
            fmt = spec.get("format") or by_id[p["item"]].get("format")
            value = parse_answer(protocol, p["query"], p["answer"], spec.get("options") or [], fmt=fmt)
            answers[(p["item"], p["query"])] = ModelAnswer(value)
        scored = score(protocol, items, answers, n_boot=10)
        assert scored.matrix.parse_failures == 0, (protocol, model)
        figures[model] = scored.printed[headline]
    figures["Random"] = score(protocol, items, random_answers(protocol, items, seed=0), n_boot=10).printed[headline]
    return figures


@pytest.mark.parametrize("protocol", [*QA_BOARDS, "oscbench"])
def test_every_demo_board_has_enough_items(protocol):
    lines = release_lines(protocol)
    assert len(lines) == DEMO_VERIFIED >= 20
    assert len({line["id"] for line in lines}) == len(lines)


@pytest.mark.parametrize("protocol", QA_BOARDS)
def test_demo_models_differ_in_the_order_of_their_skill(protocol):
    figures = board(protocol)
    models = [m.name for m in DEMO_MODELS]
    assert list(figures) == [*models, "Random"]
    # Strictly apart, strongest first, and the strongest well above Random.
    values = [figures[m] for m in models]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values), figures
    assert values[0] >= figures["Random"] + 20, figures


def test_the_demo_visualtrans_board_is_not_all_zero_and_lists_answers_at_every_letter():
    lines = release_lines("visualtrans")
    assert {line["answer"] for line in lines if line["format"] == "choice"} == {"A", "B", "C"}
    assert all(v > 0 for v in board("visualtrans").values())


def test_the_demo_m3verse_release_has_hallucination_questions_answered_by_the_none_option():
    lines = release_lines("m3verse")
    none = [line for line in lines if line["hallucination"]]
    assert len(none) == DEMO_VERIFIED // 4
    assert all(line["answer"] == ["C"] and line["options"][2] == "No correct option is listed." for line in none)


def oscbench_ratings():
    samples = registry.get("oscbench").samples
    numbers = samples.DEMO.files["verified.jsonl"][0]
    by_item: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for line in samples.demo_annotations(numbers):
        for criterion, value in line["scores"].items():
            by_item[line["item"]][criterion].append(value)
    return by_item


def test_the_demo_raters_mostly_agree_on_every_criterion():
    ratings = oscbench_ratings()
    proto = registry.get("oscbench")
    assert len(ratings) == DEMO_VERIFIED and all(len(r["object"]) == 3 for r in ratings.values())
    for criterion in proto.criteria:
        alpha = krippendorff_alpha([r[criterion] for r in ratings.values()], metric="ordinal")
        assert alpha is not None and alpha > 0.5, (criterion, alpha)


def test_the_demo_generators_differ_and_the_judges_track_the_humans():
    proto = registry.get("oscbench")
    ratings = oscbench_ratings()
    lines = release_lines("oscbench")

    def human_mean(item: str, criterion: str) -> float | None:
        values = [v for v in ratings[item][criterion] if v is not None]
        return sum(values) / len(values) if values else None

    per_generator: dict[str, list[float]] = defaultdict(list)
    for line in lines:
        per_generator[line["generator"]].append(human_mean(line["id"], "osc_accuracy"))
    means = {g: sum(v) / len(v) for g, v in per_generator.items()}
    assert sorted(means) == ["gen-0", "gen-1", "gen-2"] and all(len(v) == 8 for v in per_generator.values())
    assert means["gen-0"] > means["gen-1"] > means["gen-2"], means

    judges = proto.samples.demo_predictions(lines)
    assert sorted(judges) == ["demo-judge-careful", "demo-judge-hasty"]
    mean_tau = {}
    for judge, predictions in judges.items():
        taus = []
        for criterion in proto.criteria:
            human = [human_mean(p["item"], criterion) for p in predictions]
            tau = kendall_tau_b([p["answer"][criterion] for p in predictions], human).value
            assert tau is not None and tau > 0.2, (judge, criterion, tau)
            taus.append(tau)
        mean_tau[judge] = sum(taus) / len(taus)
    assert mean_tau["demo-judge-careful"] > mean_tau["demo-judge-hasty"] + 0.1, mean_tau


@pytest.mark.parametrize("protocol", ["visualtrans", "m3verse"])
def test_the_demo_blind_answers_pass_the_submit_check_and_are_mostly_right(protocol):
    from annotation.protocols import qa_shape
    from annotation.results import QAContext, validate_qa

    by_id = {line["id"]: line for line in release_lines(protocol)}
    answers = registry.get(protocol).samples.demo_annotations(
        registry.get(protocol).samples.DEMO.files["verified.jsonl"][0]
    )
    assert len(answers) == 2 * DEMO_VERIFIED
    right = 0
    for a in answers:
        line = by_id[a["item"]]
        checked = validate_qa(
            {"answer": a["answer"], "flags": a["flags"]}, QAContext.of(qa_shape(protocol=protocol, payload=line))
        )
        right += checked.result["answer"] == line["answer"]
    assert 0.75 <= right / len(answers) < 1, right
