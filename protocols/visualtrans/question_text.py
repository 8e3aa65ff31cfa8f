"""The options inside a VisualTrans question text, as the authors' release writes them
(docs/protocols/visualtrans.md, "The authors' files"). Plain Python.

The release has no options field: a multiple-choice question ends with its options, "A. …" then
"B. …" and so on, after a line break, one option per line ("lines") or all on that line separated
by spaces ("inline"). `split_options` takes them out of the text, `join_options` puts them back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from protocols.base import LETTERS

LAYOUTS = ("lines", "inline")
_SEPARATOR = {"lines": "\n", "inline": " "}

# A letter and a full stop, not glued to a preceding letter or digit ("block.D. Stack" still is
# one: the full stop ends the previous option).
_MARKER = re.compile(r"(?<![A-Za-z0-9])([A-Z])\.(?=\s)")


@dataclass(frozen=True)
class SplitQuestion:
    """A question text taken apart: the question without its options, the option texts (A
    first) and the layout they were written in (None when the text has no options)."""

    stem: str
    options: tuple[str, ...]
    layout: str | None


def split_options(text: str) -> SplitQuestion:
    """The question's stem and options. The options are the last run of markers A., B., C. …
    (two at least) in the text, so an "A." inside the question itself is left alone; a text
    without such a run is a question without options."""
    markers = [(m.group(1), m.start(), m.end()) for m in _MARKER.finditer(text)]
    for start in range(len(markers) - 1, -1, -1):
        if markers[start][0] != "A":
            continue
        chain = [markers[start]]
        for mark in markers[start + 1 :]:
            if mark[0] == LETTERS[len(chain)]:
                chain.append(mark)
        if len(chain) < 2:
            continue
        stem = text[: chain[0][1]].rstrip()
        if not stem:
            continue
        ends = [m[1] for m in chain[1:]] + [len(text)]
        spans = [text[m[2] : end] for m, end in zip(chain, ends, strict=True)]
        options = tuple(span.strip() for span in spans)
        if not all(options):
            continue
        # What separates one option from the next: a line break in "lines", spaces (or nothing
        # after a full stop) in "inline".
        gaps = [span[len(span.rstrip()) :] for span in spans[:-1]]
        layout = "lines" if all("\n" in g for g in gaps) else "inline"
        return SplitQuestion(stem, options, layout)
    return SplitQuestion(text, (), None)


def join_options(stem: str, options: list[str] | tuple[str, ...], layout: str | None) -> str:
    """The authors' question text: the stem, a line break, then the lettered options in the
    layout given ("lines" when none is)."""
    if not options:
        return stem
    separator = _SEPARATOR.get(layout or "lines", "\n")
    return stem + "\n" + separator.join(f"{LETTERS[i]}. {text}" for i, text in enumerate(options))
