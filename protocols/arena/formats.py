"""Pairwise votes made elsewhere (docs/protocols/arena.md, "Votes from elsewhere"), read as the
project's own annotation lines (protocols/kit/releases.py). Plain Python (no Django).

- ``arena-votes`` (annotations): JSONL, one vote a line, ``{"item", "rater", "winner": "a" | "b" |
  "tie" | "both_bad", "criterion"?}`` (no criterion, or "overall": the vote on the outputs as a
  whole). A rater's lines about one item become one annotation line ``{"item", "rater", "winner",
  "criteria"?}``, whose checks (workflow.py ``check_line``) are a submit's own. Lines already in
  that shape (``criteria`` an object) pass as they are.
- ``vbench-human-anno`` (items, writes) and ``vbench-human-anno-votes`` (annotations): VBench's
  human preference files (Vchitect/VBench, ``sampled_videos/README.md``, "Human Preference
  Labels"): a JSON array of instances ``{"prompt_en", <dimension fields: style_en, question_en,
  …>, "videos": {model: video path}, "human_anno": {model: {other model: 0 | 0.5 | 1}}}``, where
  ``human_anno[m][n] = 1`` says the humans preferred m's video, ``0`` n's, ``0.5`` equal quality.
  Each pair of models an instance compares is one arena item (``model_a`` the model named first in
  ``human_anno``); its label is one vote of the rater ``vbench-human``. Everything else of the
  instance is kept under ``extra.vbench`` and written back. The export writes the votes collected
  in StateLab (each pair's majority on the headline criterion, ``collected_label``; the export
  hands them over because the writer says ``writes_votes``), the published label where a pair has
  none; any arena item with a prompt, two models and their outputs is written, those without
  VBench provenance as instances of their prompt. A file read and exported with nothing collected
  is the same bytes when it is laid out as VBench's own JSON files are (4-space indent, no final
  newline), else the same JSON value.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from protocols.kit.releases import (
    Conversion,
    FormatRefused,
    ReleaseFormat,
    copy_media,
    first_bytes,
    media_parts,
    read_json,
    starts_with_array,
)

from .fields import HEADLINE_CRITERION, VOTE_CRITERIA, WINNERS

MAX_LISTED = 5
VOTE_KEYS = ("item", "rater", "winner", "criterion", "criteria")


def _problem(line: int, text: str) -> str:
    return f"line {line}: {text}"


class Votes(ReleaseFormat):
    name = "arena-votes"
    label = 'pairwise votes, one a line: {"item", "rater", "winner", "criterion"?}'
    kind = "annotations"

    def detect(self, path: Path) -> bool:
        path = Path(path)
        if not path.is_file():
            return False
        head = first_bytes(path).decode("utf-8-sig", errors="replace").lstrip()
        first = head.split("\n", 1)[0]
        try:
            obj = json.loads(first)
        except json.JSONDecodeError:
            return False
        return isinstance(obj, dict) and "winner" in obj

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        path = Path(path)
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        first_line: dict[tuple[str, str, str], tuple[int, Any]] = {}
        problems: list[str] = []
        votes = 0
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FormatRefused(f"{path.name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                problems.append(_problem(number, f"not valid JSON ({exc.msg} at column {exc.colno})"))
                continue
            if not isinstance(obj, dict):
                problems.append(_problem(number, f"a vote is a JSON object; found {type(obj).__name__}"))
                continue
            unknown = sorted(set(obj) - set(VOTE_KEYS))
            if unknown:
                problems.append(
                    _problem(number, f"unknown field {', '.join(unknown)}; a vote has {', '.join(VOTE_KEYS[:4])}")
                )
                continue
            item, rater = obj.get("item"), obj.get("rater")
            if not isinstance(item, str) or not isinstance(rater, str):
                problems.append(_problem(number, "item and rater are required, both strings"))
                continue
            line = merged.setdefault((item, rater), {"item": item, "rater": rater})
            pairs: list[tuple[str, Any]] = []
            if "criteria" in obj:
                if not isinstance(obj["criteria"], dict):
                    problems.append(_problem(number, "criteria must be an object criterion -> a, b, tie or both_bad"))
                    continue
                pairs += list(obj["criteria"].items())
            if "winner" in obj or "criterion" in obj:
                criterion = obj.get("criterion", HEADLINE_CRITERION)
                pairs.append((criterion, obj.get("winner")))
            for criterion, winner in pairs:
                votes += 1
                if criterion not in VOTE_CRITERIA:
                    allowed = ", ".join(VOTE_CRITERIA)
                    problems.append(_problem(number, f"criterion {criterion!r} is not one of {allowed}"))
                    continue
                if winner not in WINNERS:
                    problems.append(_problem(number, f"winner {winner!r} is not one of {', '.join(WINNERS)}"))
                    continue
                seen = first_line.setdefault((item, rater, criterion), (number, winner))
                if seen[1] != winner:
                    problems.append(
                        _problem(
                            number,
                            f"rater {rater!r} voted {winner!r} on item {item!r} ({criterion}), "
                            f"but {seen[1]!r} on line {seen[0]}",
                        )
                    )
                    continue
                if criterion == HEADLINE_CRITERION:
                    line["winner"] = winner
                else:
                    line.setdefault("criteria", {})[criterion] = winner
        for (item, rater), line in merged.items():
            if "winner" not in line and "criteria" in line:
                problems.append(
                    f"item {item!r}, rater {rater!r}: votes on {', '.join(line['criteria'])} but none on "
                    f"{HEADLINE_CRITERION} (the vote every annotation holds)"
                )
        if problems:
            raise FormatRefused(
                f"{path.name}: {len(problems)} problem{'s' if len(problems) > 1 else ''}: "
                + "; ".join(problems[:MAX_LISTED])
                + ("; …" if len(problems) > MAX_LISTED else "")
            )
        if not merged:
            raise FormatRefused(f"{path.name}: holds no votes; expected JSONL lines {self.label}")
        lines = list(merged.values())
        notes = [
            f"{votes} votes of {len({r for _, r in merged})} raters on {len({i for i, _ in merged})} items, "
            f"one annotation per (item, rater): {len(lines)}"
        ]
        return Conversion(lines=lines, notes=notes)


# --- VBench human_anno files --------------------------------------------------------------------

VBENCH_RATER = "vbench-human"
VBENCH_KEYS = ("prompt_en", "videos", "human_anno")
VBENCH_EXPECTED = (
    'a JSON array of VBench human preference instances {"prompt_en", "videos": {model: path}, '
    '"human_anno": {model: {other model: 0, 0.5 or 1}}}'
)
# human_anno[m][n]: 1 m's video preferred, 0 n's, 0.5 equal quality; as the vote about (a=m, b=n).
LABEL_WINNER = {1: "a", 0: "b", 0.5: "tie"}
WINNER_LABEL = {"a": 1, "b": 0, "tie": 0.5}


def _label(value: Any) -> float | int | None:
    """A human_anno value as published (0, 0.5, 1; 1.0 and 0.0 too); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if value in (0, 0.5, 1) else None


def _vbench_rows(path: Path) -> tuple[str, list[dict[str, Any]]]:
    path = Path(path)
    name = path.name
    rows = read_json(path, VBENCH_EXPECTED)
    if not isinstance(rows, list) or not rows:
        found = "an empty array" if rows == [] else f"a JSON {type(rows).__name__}"
        raise FormatRefused(f"{name}: {found} found; expected {VBENCH_EXPECTED}")
    return name, rows


def _pairs(number: int, row: Any) -> tuple[list[tuple[str, str, Any, Any]], list[str]]:
    """(model_a, model_b, human_anno[a][b] or None, human_anno[b][a] or None) per pair of models
    the instance compares, in the order human_anno first names them; and the row's problems."""
    where = f"instance {number}"
    if not isinstance(row, dict):
        return [], [f"{where}: a JSON {type(row).__name__}; expected an object"]
    missing = [k for k in VBENCH_KEYS if k not in row]
    if missing:
        return [], [f"{where}: no {', '.join(missing)}; an instance has {', '.join(VBENCH_KEYS)}"]
    problems: list[str] = []
    videos, anno = row["videos"], row["human_anno"]
    if not isinstance(row["prompt_en"], str) or not row["prompt_en"].strip():
        problems.append(f"{where}: prompt_en must be the prompt text")
    if not isinstance(videos, dict) or not all(isinstance(v, str) and v for v in videos.values()):
        problems.append(f"{where}: videos must be an object model -> video path")
        videos = {}
    if not isinstance(anno, dict) or not all(isinstance(inner, dict) for inner in anno.values()):
        return [], [*problems, f"{where}: human_anno must be an object model -> {{other model: 0, 0.5 or 1}}"]
    pairs: dict[frozenset[str], tuple[str, str]] = {}
    for first, inner in anno.items():
        for second, value in inner.items():
            if first == second:
                problems.append(f"{where}: human_anno[{first!r}][{second!r}] compares a model with itself")
            elif _label(value) is None:
                problems.append(f"{where}: human_anno[{first!r}][{second!r}] is {value!r}; expected 0, 0.5 or 1")
            else:
                pairs.setdefault(frozenset((first, second)), (first, second))
    out = []
    for a, b in pairs.values():
        forward, backward = anno.get(a, {}).get(b), anno.get(b, {}).get(a)
        if forward is not None and backward is not None and forward + backward != 1:
            problems.append(
                f"{where}: human_anno[{a!r}][{b!r}] = {forward!r} but human_anno[{b!r}][{a!r}] = {backward!r}; "
                "the two directions of one pair add up to 1"
            )
        for model in (a, b):
            if model not in videos:
                problems.append(f"{where}: human_anno names {model!r}, which videos does not list")
        out.append((a, b, forward, backward))
    if not out and not problems:
        problems.append(f"{where}: human_anno compares no pair of models")
    return out, problems


def _vbench_lines(path: Path) -> tuple[str, list[dict[str, Any]], int]:
    """(file name, arena item lines with their vote under extra.vbench, instances read)."""
    name, rows = _vbench_rows(path)
    stem = Path(name).stem
    lines: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, row in enumerate(rows):
        pairs, found = _pairs(number, row)
        problems += found
        if found:
            continue
        instance = {
            "file": name,
            "instance": number,
            "keys": list(row),
            "fields": {k: v for k, v in row.items() if k not in VBENCH_KEYS},
            # Lists, not objects: the stored item (a JSONB value) keeps no key order.
            "videos": [[model, rel] for model, rel in row["videos"].items()],
            "anno": [[outer, list(inner)] for outer, inner in row["human_anno"].items()],
        }
        for a, b, forward, backward in pairs:
            label = forward if forward is not None else 1 - backward
            lines.append(
                {
                    "id": f"{stem}-{number:04d}-{a}-vs-{b}",
                    "prompt": row["prompt_en"],
                    "model_a": a,
                    "model_b": b,
                    "video_a": row["videos"][a],
                    "video_b": row["videos"][b],
                    "category": stem,
                    "extra": {
                        "vbench": {
                            **instance,
                            "winner": LABEL_WINNER[label],
                            "labels": {"a_over_b": forward, "b_over_a": backward},
                        }
                    },
                }
            )
    if problems:
        shown = "; ".join(problems[:MAX_LISTED]) + ("; …" if len(problems) > MAX_LISTED else "")
        raise FormatRefused(f"{name}: {len(problems)} problem{'s' if len(problems) > 1 else ''}: {shown}")
    return name, lines, len(rows)


def _vbench_detect(path: Path) -> bool:
    path = Path(path)
    if not path.is_file() or not starts_with_array(path):
        return False
    head = first_bytes(path)
    return b'"human_anno"' in head and b'"prompt_en"' in head


class VBenchHumanAnno(ReleaseFormat):
    name = "vbench-human-anno"
    label = "VBench human_anno preference file (Vchitect/VBench)"
    kind = "items"
    writes = True

    def detect(self, path: Path) -> bool:
        return _vbench_detect(path)

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        name, lines, instances = _vbench_lines(path)
        root = Path(media_root) if media_root is not None else Path(path).parent
        notes = [
            f"read {instances} instances of {name}, a VBench human preference file: one arena item per pair of "
            f"models an instance compares ({len(lines)} items)",
            "prompt_en -> prompt; the pair's models (as human_anno first names them) -> model_a, model_b; "
            "videos[model] -> video_a, video_b (relative to the media root); the file's name -> category",
            "kept under extra.vbench (written back on export): the instance's other fields, its videos, the "
            "order of human_anno and the pair's published labels; import the same file as annotations "
            f"(vbench-human-anno-votes) for the votes, one per item, rater {VBENCH_RATER!r}",
        ]
        return Conversion(lines=lines, media_root=root, notes=notes)

    # The export hands this writer the release's collected votes (annotation/interchange/authors.py).
    writes_votes = True

    def write(
        self,
        lines: Iterable[Mapping[str, Any]],
        out_dir: Path,
        *,
        open_media: Callable[[str], BinaryIO] | None = None,
        votes: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> list[Path]:
        """VBench's files of a release: human_anno holds the votes collected on each pair (``votes``:
        item id -> its stored answers; the headline criterion's majority, ``collected_label``), else
        the labels published with the item (``extra.vbench``). An item read from a VBench file goes
        back to its file and instance (the prompt and video paths as the items hold them now); any
        other item joins an instance of its prompt in ``<category>.json`` (``human_anno.json``
        without a category; a second instance of the prompt where a model's output differs),
        instances in the order their prompts first come, and only with votes
        collected (a pair nobody voted on has no label to write; an instance without one is left
        out). With ``open_media``, the videos at their paths. A release with no label to write, or
        an item without a prompt, models or outputs, is refused before a file is written."""
        votes = votes or {}
        files: dict[str, dict[Any, dict[str, Any]]] = {}
        media: dict[str, str] = {}
        for line in lines:
            collected = collected_label(votes.get(str(line.get("id")), ()))
            source = (line.get("extra") or {}).get("vbench")
            a, b = line.get("model_a"), line.get("model_b")
            outputs = {a: line.get("video_a") or line.get("image_a"), b: line.get("video_b") or line.get("image_b")}
            if isinstance(source, dict):
                name, key = str(source["file"]), int(source["instance"])
                fresh = {"source": source, "prompt": line["prompt"], "videos": dict(source["videos"]), "labels": {}}
                published = source.get("labels") or {}
                forward, backward = published.get("a_over_b"), published.get("b_over_a")
                if collected is not None and collected != source.get("winner"):
                    forward, backward = WINNER_LABEL[collected], 1 - WINNER_LABEL[collected]
            else:
                _refuse_bare(line, outputs)
                category = line.get("category")
                name = f"{category}.json" if isinstance(category, str) and category else "human_anno.json"
                key = _instance_key(files.get(name, {}), line["prompt"], outputs)
                fresh = {"source": None, "prompt": line["prompt"], "videos": {}, "labels": {}}
                forward = backward = None
                if collected is not None:
                    forward, backward = WINNER_LABEL[collected], 1 - WINNER_LABEL[collected]
            media_parts(name)
            instance = files.setdefault(name, {}).setdefault(key, fresh)
            for model, rel in outputs.items():
                if rel:
                    instance["videos"][model] = rel
                    media[rel] = rel
            instance["labels"][(a, b)] = forward
            instance["labels"][(b, a)] = backward
        rows_of = {name: _rows(instances) for name, instances in files.items()}
        if not any(rows_of.values()):
            raise FormatRefused(
                "no label to write: no vote was collected on the release's pairs and none of its items came "
                "from a VBench human_anno file with published labels"
            )
        out_dir = Path(out_dir)
        written = []
        for name, rows in rows_of.items():
            if not rows:
                continue
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(rows, indent=4, ensure_ascii=False), encoding="utf-8")
            written.append(target)
        if open_media is not None:
            shown = {rel for rows in rows_of.values() for row in rows for rel in row["videos"].values()}
            for rel in media:
                if rel in shown:
                    written.append(copy_media(open_media, rel, out_dir / Path(*media_parts(rel))))
        return written


def _instance_key(instances: Mapping[Any, Mapping[str, Any]], prompt: str, outputs: Mapping[Any, Any]) -> tuple:
    """The new instance a pair joins: the first of its prompt where neither model has another
    output already (VBench holds one video per model and prompt), else a new one."""
    n = 0
    while (key := ("prompt", prompt, n)) in instances:
        videos = instances[key]["videos"]
        if all(videos.get(model, rel) == rel for model, rel in outputs.items()):
            break
        n += 1
    return key


def collected_label(answers: Iterable[Mapping[str, Any]]) -> str | None:
    """The winner a pair's collected votes give (their headline criterion, ``winner``): the verdict
    most votes gave; "tie" where two verdicts share the most votes (VBench's 0.5, no preference);
    "both bad" is written as a tie, VBench having no such label. None: no vote."""
    counts = Counter(
        "tie" if x.get("winner") == "both_bad" else x.get("winner")
        for x in answers
        if isinstance(x, Mapping) and x.get("winner") in WINNERS
    )
    if not counts:
        return None
    (best, most), *rest = counts.most_common()
    return "tie" if rest and rest[0][1] == most else best


def _refuse_bare(line: Mapping[str, Any], outputs: Mapping[Any, Any]) -> None:
    """An item without VBench provenance needs a prompt, two named models and both outputs."""
    missing = [k for k in ("prompt", "model_a", "model_b") if not isinstance(line.get(k), str) or not line.get(k)]
    if not missing and len(outputs) < 2:
        missing.append("two different models")
    missing += [f"the output of {m!r}" for m, rel in outputs.items() if isinstance(m, str) and not rel]
    if missing:
        raise FormatRefused(
            f"item {line.get('id')!r} has no {', '.join(missing)}; a VBench instance needs the prompt, the two "
            "models' names and their outputs (video_a/video_b or image_a/image_b)"
        )


def _rows(instances: Mapping[Any, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A file's instances as VBench rows: those read from the file in their order, then the new ones
    in the order their prompts came (a new instance without a label is left out)."""
    read = sorted((k, v) for k, v in instances.items() if isinstance(k, int))
    new = [v for k, v in instances.items() if not isinstance(k, int)]
    rows = [_vbench_row(instance) for _n, instance in read]
    for instance in new:
        row = _new_row(instance)
        if row["human_anno"]:
            rows.append(row)
    return rows


def _vbench_row(instance: Mapping[str, Any]) -> dict[str, Any]:
    source, labels = instance["source"], instance["labels"]
    anno = {
        outer: {inner: labels[(outer, inner)] for inner in inners if labels.get((outer, inner)) is not None}
        for outer, inners in source["anno"]
    }
    values = {"prompt_en": instance["prompt"], "videos": instance["videos"], "human_anno": anno}
    return {key: values[key] if key in values else source["fields"][key] for key in source["keys"]}


def _new_row(instance: Mapping[str, Any]) -> dict[str, Any]:
    anno: dict[str, dict[str, Any]] = {}
    for (outer, inner), value in instance["labels"].items():
        if value is not None:
            anno.setdefault(outer, {})[inner] = value
    return {"prompt_en": instance["prompt"], "videos": instance["videos"], "human_anno": anno}


class VBenchHumanAnnoVotes(ReleaseFormat):
    name = "vbench-human-anno-votes"
    label = "VBench human_anno preference file, its labels as votes (Vchitect/VBench)"
    kind = "annotations"

    def detect(self, path: Path) -> bool:
        return _vbench_detect(path)

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        name, lines, instances = _vbench_lines(path)
        votes = [{"item": x["id"], "rater": VBENCH_RATER, "winner": x["extra"]["vbench"]["winner"]} for x in lines]
        notes = [
            f"read {instances} instances of {name}: one vote per pair of models ({len(votes)} votes), rater "
            f"{VBENCH_RATER!r}, on the items vbench-human-anno makes of the same file",
            "human_anno[a][b] 1 -> winner a, 0 -> b, 0.5 -> tie (the published labels are one judgement per "
            "pair: VBench names no raters)",
        ]
        return Conversion(lines=votes, notes=notes)


FORMATS = (Votes(), VBenchHumanAnno(), VBenchHumanAnnoVotes())
