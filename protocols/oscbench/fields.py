"""OSCBench item lines (docs/protocols/oscbench.md): a generated video and its prompt. Items have
no label fields (their labels are ratings, imported with ``import_annotations``), so they arrive
pending unless imported as verified. A gold item gives its expected rating in ``gold_scores``
({criterion: 1..5, or null where N/A is expected}, any non-empty subset of the criteria; a rating
within GOLD_TOLERANCE of each is right); on an item that is not gold it is refused."""

from __future__ import annotations

from protocols import fields

CRITERIA = ("subject", "object", "action", "osc_accuracy", "osc_consistency", "scene", "realism", "aesthetics")
# Criteria that may be N/A when the prompt names no subject / no scene.
NULLABLE = ("subject", "scene")
SCENARIOS = ("regular", "novel", "compositional")
# The authors' codes of the criteria, in the order of CRITERIA: their judge script asks for them and
# their rating files are keyed by them (docs/protocols/oscbench.md, "The authors' files").
AUTHOR_CODES = dict(zip(("1a", "1b", "2a", "3a", "3b", "4a", "5a", "5b"), CRITERIA))

gold_scores = fields.expected_scores(CRITERIA, NULLABLE)

ITEM_FIELDS = fields.ItemFields(
    required={"video": fields.media_path, "prompt": fields.any_text},
    optional={
        "generator": fields.any_text,
        "scenario": fields.choice(SCENARIOS),
        "action": fields.any_text,
        "action_category": fields.any_text,
        "object": fields.any_text,
        "object_category": fields.any_text,
    },
    labels={},
    labels_required=(),
    gold_answer={"gold_scores": gold_scores},
)
