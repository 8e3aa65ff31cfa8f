"""The interface every protocol package implements, and the helpers they share. Plain Python.

A protocol is one benchmark: a package ``protocols/<name>/`` whose
``__init__`` defines a subclass of ``Protocol`` and exposes one instance as ``protocol``. The
apps (annotation, inference, evaluation) and the pages never name a protocol: they ask the
registry (protocols.registry.get(name)) for this object and read its facts or call its methods.

What a protocol says, in the order the platform uses it:
- item side: ``media_fields`` (payload field -> "image" | "video" | "images"), the workflow form
  it is annotated in (``workflow``: quintuplet, box, qa or rating, or a form of its own named by
  ``workflow_module``) and the fields that form's
  result holds (``result_fields`` for quintuplets, ``criteria`` / ``nullable`` / labels / rubric
  for ratings), ``answer_shape`` for QA forms, ``default_annotations_per_item``, the project
  settings it reads (``settings_keys``);
- model side: ``query_keys``, ``answer_kind`` (how a reply is parsed: protocols/kit/answers.py)
  and ``resolve_queries`` (the option orders and correct answers of one item, seeded),
  ``vocabulary`` (release-wide data its queries need) and ``vocabulary_param`` (the job
  parameter a job keeps it under), ``strategies`` (ways of asking besides the direct one, each a
  module of the package: ``strategy(name)``), and the module named by ``prompts_module``
  (``PROMPT_VERSION``, ``build(item, *, media, params)``: see protocols/kit/prompting.py);
- evaluation side: ``metrics`` (key -> (short name, definition)), ``ranking`` and
  ``alternative_rankings``, ``chance``, ``places``, ``human_row``, ``board`` ("models", or
  "generators" for a rating protocol whose rows are the items' generators), ``cluster_key``
  (the payload field, dotted path or tuple of them whose items a statistic resamples together and
  clustered errors group: protocols/kit/clustered.py; or None), and the module named
  by ``scoring_module`` (``KEYS``, ``printed(matrix)``, ``cis(matrix, *, n_boot, seed)``,
  ``score(items, answers)``, ``random_answer_set(items, *, rng)``);
- lmms-eval export (annotation/interchange/lmms_eval.py): the module named by ``lmms_module``
  (``Task``, an LmmsTask of protocols/kit/lmms.py: the documents, metric keys and derived media of
  the task folder; its standalone scoring is ``<package>/lmms_utils.py``), or None for a protocol
  with no lmms-eval task;
- the authors' own files: the module named by ``formats_module`` (``FORMATS``, ReleaseFormat
  objects of protocols/kit/releases.py: the paper's release read as published and written back,
  annotation and judge outputs of the authors' code), or None;
- samples: the module named by ``samples_module`` (a made-up dataset for the demo and the tests:
  protocols/kit/samples.py).

Modules named by ``prompts_module`` / ``scoring_module`` / ``samples_module`` / ``lmms_module`` are
imported on first use only, so reading a protocol's facts never loads numpy, the inference toolkit
or the scoring engine.
"""

from __future__ import annotations

import importlib
import random
import string
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any, ClassVar

LETTERS = string.ascii_uppercase


def seeded_rng(seed: int, item_id: str, key: str) -> random.Random:
    """The one source of every option order shown to a model: (seed, item id, query key).

    random.Random seeded with a str is stable across processes and Python versions (v2 seeding).
    """
    return random.Random(f"{seed}:{item_id}:{key}")


def letter(index: int) -> str:
    return LETTERS[index]


def shuffled(options: list[Any], rng: random.Random) -> list[Any]:
    out = list(options)
    shuffle(out, rng)
    return out


def shuffle(x: list[Any], rng: random.Random) -> None:
    """``rng.shuffle(x)``: the same swaps from the same draws, without a method call per swap.

    For a plain random.Random, shuffle's ``_randbelow(i + 1)`` is ``getrandbits((i + 1).bit_length())``
    redrawn while it is ``> i``; that loop is written out here, its steps (i and the bit count) read
    from a table made once per length (tests/annotation/test_freeze_resolvers.py compares it with
    the standard library's for many seeds and lengths). Any other generator shuffles itself."""
    if type(rng) is not random.Random:
        rng.shuffle(x)
        return
    getrandbits = rng.getrandbits
    for i, k in _SHUFFLE_STEPS.get(len(x)) or _shuffle_steps(len(x)):
        j = getrandbits(k)
        while j > i:
            j = getrandbits(k)
        x[i], x[j] = x[j], x[i]


# length -> ((i, (i + 1).bit_length()) for i from length - 1 down to 1): the steps of a shuffle.
_SHUFFLE_STEPS: dict[int, tuple[tuple[int, int], ...]] = {}


def _shuffle_steps(length: int) -> tuple[tuple[int, int], ...]:
    steps = tuple((i, (i + 1).bit_length()) for i in range(length - 1, 0, -1))
    if length <= 256:  # the lengths option lists have (tables for all: ~33k pairs); a longer list's is not kept
        _SHUFFLE_STEPS[length] = steps
    return steps


class Protocol:
    """One benchmark's particulars. Subclasses set the class attributes and override the methods
    whose default does not fit; see the module docstring for who reads what."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""  # the human name of projects' protocol choice
    workflow: ClassVar[str] = ""  # quintuplet | box | qa | rating, or the name of the protocol's own form
    # A form of its own: the name of a module of the package implementing it (see "A workflow of
    # its own" in annotation/protocols.py); None: the protocol is annotated in one of the four forms.
    workflow_module: ClassVar[str | None] = None
    # Matchmaking: a module of the package whose ``item_priorities(items, votes, open_keys=, seed=)``
    # ranks the open items (annotation/queue/ranks.py writes the ranks the queue hands items out
    # by within a level); None: items go in id order.
    matchmaking_module: ClassVar[str | None] = None
    # Pairwise judges: a module of the package with the judge statistics the "Judges" page reads
    # (evaluation/judges.py: human_majority, run_asks, judge_report, kendall_tau); None: no such page.
    judging_module: ClassVar[str | None] = None
    # Project settings of the protocol's own: a module of the package whose ``SETTING_CHECKS`` maps
    # each of its keys (also listed in ``settings_keys``) to ``clean(value, errors)`` (the clean
    # value, or None with the reason in errors); annotation/project_setup.py checks and reads them as
    # it does the shared keys. None: the protocol reads shared settings only.
    settings_module: ClassVar[str | None] = None
    # A votes board's rater screen and the raters a researcher excludes from it (evaluation/
    # rater_exclusion.py): a module with ``EXCLUDED_SETTING`` (the project setting holding the
    # excluded rater keys), ``rater_key_valid(key)``, ``screen(items, votes)`` (rows with
    # ``rater`` and ``to_json()``) and ``without_raters(votes, excluded)``; None: no rater screen.
    rater_screen_module: ClassVar[str | None] = None
    media_fields: ClassVar[dict[str, str]] = {}
    # The item line's fields and their checks (protocols/fields.py ItemFields; the protocol's fields.py).
    item_fields: ClassVar[Any] = None
    # Payload fields an annotator is shown as they are (besides the media and what the workflow's
    # form derives); an allow-list: nothing else of the payload reaches an annotator.
    annotator_fields: ClassVar[tuple[str, ...]] = ()
    query_keys: ClassVar[tuple[str, ...]] = ()
    # How a reply (a model's or a blind annotator's) is read (protocols/kit/answers.py PARSERS): "choice"
    # (a letter), "candidate" (a 1-based number or the label), "qa" (choice / count / set by the
    # item's format), "letters" (a set of letters), "judge" (criterion -> 1..5 or None as JSON).
    answer_kind: ClassVar[str] = "choice"
    # The job parameter under which a job stores ``vocabulary`` (so every chunk of a job draws
    # options alike); None when the protocol's queries need no release-wide data.
    vocabulary_param: ClassVar[str | None] = None
    # Strategies besides "direct": names of modules of the package with ``run`` and ``PROMPT_VERSION``.
    strategies: ClassVar[tuple[str, ...]] = ()
    default_annotations_per_item: ClassVar[int] = 1
    settings_keys: ClassVar[tuple[str, ...]] = ()  # protocol-specific project settings it reads
    # quintuplet forms: the fields of one result, in the form's order, and the closed ones with
    # the values each allows (in the form's order; gold items are checked on these)
    result_fields: ClassVar[tuple[str, ...]] = ()
    result_choices: ClassVar[dict[str, tuple[str, ...]]] = {}
    # Closed label fields (of ``result_choices``) that a labelling pass may fill on verified items
    # that lack them (annotation/fill_pass.py): annotators answer just these, reviewers verify, and
    # the values join the item's payload. (): no such pass for this protocol.
    fill_fields: ClassVar[tuple[str, ...]] = ()
    # rating forms: criteria (in the form's order), those that may be N/A, labels, default rubric
    criteria: ClassVar[tuple[str, ...]] = ()
    nullable: ClassVar[tuple[str, ...]] = ()
    criterion_labels: ClassVar[dict[str, str]] = {}
    default_rubric: ClassVar[dict[str, str]] = {}
    # how far (in points) a rating may lie from a gold item's expected score and still count as right
    gold_tolerance: ClassVar[int] = 0
    # evaluation
    metrics: ClassVar[dict[str, tuple[str, str]]] = {}
    ranking: ClassVar[tuple[str, ...]] = ()
    alternative_rankings: ClassVar[dict[str, tuple[str, ...]]] = {}
    places: ClassVar[int] = 2  # printed decimals: percent with two unless the protocol says otherwise
    percent: ClassVar[bool] = True
    human_row: ClassVar[bool] = False  # blind answers make a Human row
    # "models", "generators" (rows per payload["generator"]) or "votes" (rows from the human votes of
    # a pairwise form: the scoring module's ``vote_board(items, votes)``)
    board: ClassVar[str] = "models"
    # the payload field grouping items for clustered errors (protocols/kit/clustered.py): a name, a
    # dotted path ("extra.video_id") or a tuple of them; None: every item stands alone
    cluster_key: ClassVar[str | tuple[str, ...] | None] = None
    prompts_module: ClassVar[str] = "prompts"
    scoring_module: ClassVar[str] = "scoring"
    # The lmms-eval task (protocols/kit/lmms.py); None: the protocol has none.
    lmms_module: ClassVar[str | None] = None
    # The authors' file formats (protocols/kit/releases.py); None: the protocol reads only the project's own.
    formats_module: ClassVar[str | None] = None
    # A made-up sample dataset for the demo and the tests (protocols/kit/samples.py); None: none.
    samples_module: ClassVar[str | None] = "samples"
    # The protocol's spec page, relative to the repository root.
    spec: ClassVar[str] = ""

    def __repr__(self) -> str:
        return f"<Protocol {self.name}>"

    # --- item side ---------------------------------------------------------------------------
    def answer_shape(
        self, payload: Mapping[str, Any], project_settings: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The answer a QA item takes: {"format", "n_options", "multiple"} (the facts a model's
        prompt states too), and optionally "none_option": the letter of an option saying that none
        of the others is correct, the one way an answer says so (annotation/results.py validate_qa).
        Default: the item's own format, one answer."""
        fmt = payload.get("format") or "choice"
        return {"format": fmt, "n_options": len(payload.get("options") or []), "multiple": False}

    def known_answer_form(self, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        """How an item's known QA answer is stored: keyword arguments of annotation.canonical.qa_answer
        ({"fmt", "multiple"}), or None when the protocol's answer is kept as given."""
        return None

    def box_pixels(self, payload: dict[str, Any], width: int | None, height: int | None) -> str | None:
        """An imported item's box in image pixels, rewritten in place where the line measured it
        otherwise (a box protocol's ``box_units``); the reason the box is refused, or None. The
        importer calls it once the image's size is known. Default: boxes are given in pixels."""
        return None

    # --- model side --------------------------------------------------------------------------
    def vocabulary(self, payloads: Iterable[Mapping[str, Any]]) -> Any:
        """Release-wide data ``resolve_queries`` needs (None when an item's queries need only the item)."""
        return None

    def resolve_queries(
        self, item_id: str, payload: Mapping[str, Any], *, seed: int, vocabulary: Any = None
    ) -> dict[str, dict[str, Any]]:
        """{query_key: {"options": [...], "answer": ...}} of one item, option orders seeded."""
        raise NotImplementedError

    @property
    def prompts(self) -> ModuleType:
        return self._submodule(self.prompts_module)

    @property
    def scoring(self) -> ModuleType:
        return self._submodule(self.scoring_module)

    @property
    def samples(self) -> ModuleType | None:
        return self._submodule(self.samples_module) if self.samples_module else None

    @property
    def judging(self) -> ModuleType | None:
        return self._submodule(self.judging_module) if self.judging_module else None

    @property
    def matchmaking(self) -> ModuleType | None:
        return self._submodule(self.matchmaking_module) if self.matchmaking_module else None

    @property
    def rater_screen(self) -> ModuleType | None:
        return self._submodule(self.rater_screen_module) if self.rater_screen_module else None

    def setting_check(self, key: str) -> Any:
        """The check of one of the protocol's own project settings (``settings_module``):
        ``clean(value, errors)``, or None when the protocol brings none for ``key``."""
        if not self.settings_module or key not in self.settings_keys:
            return None
        return self._submodule(self.settings_module).SETTING_CHECKS.get(key)

    @property
    def lmms(self) -> ModuleType | None:
        return self._submodule(self.lmms_module) if self.lmms_module else None

    @property
    def formats(self) -> tuple[Any, ...]:
        """The protocol's ReleaseFormat objects (protocols/kit/releases.py), () when it has none."""
        return tuple(self._submodule(self.formats_module).FORMATS) if self.formats_module else ()

    def format_named(self, name: str, kind: str | None = None) -> Any:
        """One of ``formats`` by name (and kind); ValueError naming the formats there are."""
        for fmt in self.formats:
            if fmt.name == name and (kind is None or fmt.kind == kind):
                return fmt
        known = ", ".join(f.name for f in self.formats if kind is None or f.kind == kind) or "none"
        raise ValueError(f"protocol {self.name} has no format {name!r} (its formats: {known})")

    def strategy(self, name: str) -> ModuleType:
        """The module of one of ``strategies`` (ValueError for a strategy the protocol lacks)."""
        if name not in self.strategies:
            raise ValueError(f"protocol {self.name} has no {name} strategy")
        return self._submodule(name)

    def _submodule(self, name: str) -> ModuleType:
        package = type(self).__module__
        return importlib.import_module(name if "." in name else f"{package}.{name}")

    # --- evaluation side ---------------------------------------------------------------------
    def chance(self, metric: str) -> Any:
        """Chance level of a metric (a Decimal, percent), None where there is no fixed one."""
        return None
