"""Human names and definitions of every leaderboard metric (which one a board is ranked by: ranking.py).

The one place a metric key (``acc_osi``, ``state_acc_distractor_crop``, ``state_change:scenario:novel``)
turns into words: column headers, their tooltips, chart titles and the legend of the pages and
downloads read from here. Plain Python, no Django. Definitions follow the source papers' metrics
(PROTOCOLS.md), worded for a reader of the table.
"""
from __future__ import annotations

# key -> (short column name, definition). Percentages unless the protocol says otherwise.
METRICS: dict[str, dict[str, tuple[str, str]]] = {
    "status": {
        "acc_osi": ("Acc OSI", "Object state identification, per query: share of the 2N queries (image A → its state, "
                               "image B → its state) answered correctly."),
        "acc_ir": ("Acc IR", "Image retrieval, per query: share of the 2N queries (state text → the image showing it) "
                             "answered correctly."),
        "acc_sci": ("Acc SCI", "State change identification with two options: share of items whose true change "
                               "description was picked over one distractor."),
        "oa": ("OA", "Overall accuracy: mean of Acc OSI, Acc IR and Acc SCI."),
        "racc_osi": ("RAcc OSI", "Rigorous OSI accuracy: share of items with both OSI queries (image A and image B) "
                                 "correct."),
        "racc_ir": ("RAcc IR", "Rigorous IR accuracy: share of items with both IR queries (state A and state B) "
                               "correct."),
        "racc_sci": ("RAcc SCI", "Rigorous SCI accuracy: share of items whose true change was picked among four "
                                 "options (the change and three distractors)."),
        "roa": ("ROA", "Rigorous overall accuracy: share of items with all of OSI A, OSI B, IR A, IR B and the "
                       "four-option SCI correct (chance 1.56 %)."),
    },
    "changeit": {
        **{f"state_acc_{s}_{c}": (
            f"State acc. · {s} · {c}",
            f"State accuracy: share of images whose exact state label was picked among 10 candidates "
            f"({'the object’s other states, then labels of other objects' if s == 'standard' else 'the item’s close-in-meaning distractors, then random labels'}), "
            f"shown the {'whole image' if c == 'full' else 'annotated box cropped out'}. Chance 10 %.")
            for s in ("standard", "distractor") for c in ("full", "crop")},
        **{f"object_acc_{s}_{c}": (
            f"Object acc. · {s} · {c}",
            f"Object accuracy: share of images where the picked label names the right object (its state may be "
            f"wrong); {s} candidates, {'whole image' if c == 'full' else 'cropped box'}.")
            for s in ("standard", "distractor") for c in ("full", "crop")},
    },
    "visualtrans": {
        "fine_grained": ("Fine-grained", "Accuracy on fine-grained spatial questions (details of the objects that "
                                         "changed)."),
        "global": ("Global", "Accuracy on global spatial questions (the scene as a whole)."),
        "spatial_mean": ("Spatial (mean)", "Spatial dimension: mean of the fine-grained and global accuracies, each "
                                           "as printed (two decimals)."),
        "intermediate": ("Intermediate", "Accuracy on intermediate-state questions (what lies between the initial "
                                         "and final images)."),
        "causal": ("Causal", "Accuracy on causal questions (what made the change happen)."),
        "planning": ("Planning", "Accuracy on planning questions (the steps that lead from initial to final)."),
        "procedural_mean": ("Procedural (mean)", "Procedural dimension: mean of the intermediate, causal and "
                                                 "planning accuracies the model could answer."),
        "quantitative": ("Quantitative", "Accuracy on quantitative questions (counts and amounts)."),
        "overall": ("Overall", "Correct answers over all questions; a subtask the model cannot answer counts as "
                               "wrong."),
    },
    "m3verse": {
        "overall": ("Overall", "Mean partial credit over all questions: 0 when any picked option is wrong, else "
                               "the share of the correct options that were picked."),
        "intra": ("Intra-state", "Mean credit on intra-state questions, answerable from one state (the before or "
                                   "the after video) alone."),
        "inter": ("Inter-state", "Mean credit on inter-state questions, which need the before and after videos "
                                 "compared to find what changed."),
        **{f"{ctx}_{cap}": (f"{ctx.capitalize()}-state · {cap}", f"Mean credit on {ctx}-state questions that test {cap} "
                                                            f"understanding.")
           for ctx in ("intra", "inter") for cap in ("spatial", "temporal", "attribute", "reasoning")},
        "hallucination": ("Hallucination", "Mean credit on questions whose correct answer is the 'no correct "
                                           "option listed' option."),
        "factual": ("Factual", "Mean credit on questions whose answer is among the listed options."),
    },
    "oscbench": {
        "subject": ("Subject", "Semantic adherence: the subject the prompt names is shown (mean 1–5 rating, "
                               "normalised to 0–1; N/A is left out)."),
        "object": ("Object", "Semantic adherence: the object the prompt names is shown (normalised mean rating)."),
        "action": ("Action", "Semantic adherence: the action the prompt names is performed (normalised mean "
                             "rating)."),
        "osc_accuracy": ("State-change accuracy", "The object ends in the state the prompt asks for (normalised "
                                                  "mean rating)."),
        "osc_consistency": ("State-change consistency", "The change unfolds coherently, without jumps or "
                                                        "reversals (normalised mean rating)."),
        "scene": ("Scene", "The scene the prompt names is shown (normalised mean rating; N/A when none is named)."),
        "realism": ("Realism", "Physical and visual plausibility (normalised mean rating)."),
        "aesthetics": ("Aesthetics", "Visual quality (normalised mean rating)."),
        "criteria_mean": ("Mean of criteria", "Mean of the eight criteria's normalised mean ratings (over the criteria "
                                              "rated; N/A never counts as 0): the overall score the paper's Figure 3 "
                                              "ranks generators by, and the correlation page's system level."),
        "state_change": ("State-change score", "Mean of state-change accuracy and consistency (normalised, 0–1)."),
    },
}

GROUPS = {"category": "category", "difference": "difference", "scenario": "scenario",
          "action_category": "action category"}

# What the two reference rows of a leaderboard are, for the page's legend.
BASELINES = {
    "Random": "Random: seeded random answers (uniform over the options; random 1–5 ratings for videos) scored by "
              "the same code as the models. A model near this row has learnt nothing the metric can see.",
    "Human": "Human: annotators' blind answers (given without the ground truth) scored like a model's.",
    "Chance": "Chance: the expected score of guessing, from the number of options alone (no row of answers).",
}


def split_key(protocol: str, key: str) -> tuple[str, str, str]:
    """(metric, group kind, group value): "category:positional:roa" (STATUS) and
    "state_change:scenario:novel" (OSCBench) both name a metric over one group of items."""
    parts = key.split(":")
    if len(parts) == 3:
        if parts[0] in METRICS.get(protocol, {}):
            return parts[0], parts[1], parts[2]
        return parts[2], parts[0], parts[1]
    return key, "", ""


def metric_name(protocol: str, key: str) -> str:
    """Short human name of a metric or breakdown key ("category:positional:roa" -> "ROA · category positional")."""
    metric, kind, value = split_key(protocol, key)
    name = METRICS.get(protocol, {}).get(metric, (metric.replace("_", " "), ""))[0]
    if not kind:
        return name
    return f"{name} · {GROUPS.get(kind, kind)} {value.replace('_', ' ')}".strip()


def metric_definition(protocol: str, key: str) -> str:
    """The definition shown as the column's tooltip, limited to the breakdown's items where it is one."""
    metric, kind, value = split_key(protocol, key)
    text = METRICS.get(protocol, {}).get(metric, ("", ""))[1]
    if kind and text:
        text = f"{text} Only items whose {GROUPS.get(kind, kind)} is {value.replace('_', ' ')}."
    return text
