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
  instance is kept under ``extra.vbench`` and written back: a file read and exported unchanged is
  the same bytes when it is laid out as VBench's own JSON files are (4-space indent, no final
  newline), else the same JSON value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
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

    def write(
        self,
        lines: Iterable[Mapping[str, Any]],
        out_dir: Path,
        *,
        open_media: Callable[[str], BinaryIO] | None = None,
    ) -> list[Path]:
        """One ``<file>.json`` per VBench file the items came from, instances in their order, each
        rebuilt from its pairs (the prompt and video paths as the items hold them now, the labels as
        published); with ``open_media``, the videos at their paths. Items without VBench
        provenance (``extra.vbench``) refuse the whole release before a file is written."""
        files: dict[str, dict[int, dict[str, Any]]] = {}
        media: dict[str, str] = {}
        for line in lines:
            source = (line.get("extra") or {}).get("vbench")
            if not isinstance(source, dict):
                raise FormatRefused(
                    f"item {line.get('id')!r} was not read from a VBench human_anno file (no extra.vbench); "
                    "the VBench writer writes back the items of such files only"
                )
            name = str(source["file"])
            media_parts(name)
            instance = files.setdefault(name, {}).setdefault(
                int(source["instance"]),
                {"source": source, "prompt": line["prompt"], "videos": dict(source["videos"]), "labels": {}},
            )
            a, b = line["model_a"], line["model_b"]
            for model, field in ((a, "video_a"), (b, "video_b")):
                if line.get(field):
                    instance["videos"][model] = line[field]
                    media[line[field]] = line[field]
            labels = source.get("labels") or {}
            instance["labels"][(a, b)] = labels.get("a_over_b")
            instance["labels"][(b, a)] = labels.get("b_over_a")
        out_dir = Path(out_dir)
        written = []
        for name, instances in files.items():
            rows = [_vbench_row(instances[n]) for n in sorted(instances)]
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(rows, indent=4, ensure_ascii=False), encoding="utf-8")
            written.append(target)
        if open_media is not None:
            for rel in media:
                written.append(copy_media(open_media, rel, out_dir / Path(*media_parts(rel))))
        return written


def _vbench_row(instance: Mapping[str, Any]) -> dict[str, Any]:
    source, labels = instance["source"], instance["labels"]
    anno = {
        outer: {inner: labels[(outer, inner)] for inner in inners if labels.get((outer, inner)) is not None}
        for outer, inners in source["anno"]
    }
    values = {"prompt_en": instance["prompt"], "videos": instance["videos"], "human_anno": anno}
    return {key: values[key] if key in values else source["fields"][key] for key in source["keys"]}


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
