"""Answer normalization, as the scorers use it: the canonical forms live with the code that
parses model output (inference.answers, plain Python, no Django), and scoring reads them here.

Data flows annotation -> inference -> evaluation: evaluation may read inference, never the
other way round.
"""
from inference.answers import (
    LETTERS,
    OSC_CRITERIA,
    normalize_int,
    normalize_letter,
    normalize_set,
    normalize_text,
    parse_answer,
    parse_candidate_number,
    parse_choice,
    parse_judge,
    parse_letter_set,
)

__all__ = [
    "LETTERS", "OSC_CRITERIA", "normalize_int", "normalize_letter", "normalize_set", "normalize_text", "parse_answer",
    "parse_candidate_number", "parse_choice", "parse_judge", "parse_letter_set",
]
