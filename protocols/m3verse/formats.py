"""M3-Verse's QA lines as the authors' pipeline writes them, read and written back
(docs/protocols/m3verse.md, "The authors' files"; the interface: protocols/kit/releases.py).

The pipeline (Wal-K-aWay/M3-Verse_pipeline) writes one JSON object per line and per question:
``scene_id`` (the scene's folder, ``scene_<n>``), ``question_id`` (``<scene_id>-<n>``),
``state_type`` (``intra-state``: one recording answers it, ``inter-states``: both compared),
``question``, ``options`` (each text behind its letter, ``"A. …"``), ``answer`` (the list of
right letters), ``question_type`` (``single_choice`` / ``multiple_choice``), ``category``,
``subcategory``, ``generator_name``, ``hallucination`` (the right option is "No correct option
is listed."), and, after its capability-tagging step, ``capabilities`` (names such as "spatial
understanding"). Each scene's two recordings are ``<scene_id>/state_0.mp4`` (before the changes)
and ``<scene_id>/state_1.mp4`` (after) in its data folder.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from protocols.base import LETTERS
from protocols.kit.releases import Conversion, FormatRefused, ReleaseFormat, copy_media

from .fields import CAPABILITIES

QA_FILE = "QAs/M3-Verse.jsonl"  # where write() puts the lines, beside data/ as in the pipeline
DATA_FOLDER = "data"
VIDEOS = ("state_0.mp4", "state_1.mp4")  # before, after
CONTEXT_OF = {"intra-state": "intra", "inter-states": "inter", "inter-state": "inter"}
STATE_TYPE_OF = {"intra": "intra-state", "inter": "inter-states"}
# The pipeline's capability names (its tagging step) and the protocol's.
CAPABILITY_OF = {
    "spatial understanding": "spatial",
    "temporal understanding": "temporal",
    "attribute recognition": "attribute",
    "reasoning": "reasoning",
}
AUTHORS_CAPABILITY = {short: name for name, short in CAPABILITY_OF.items()}
MULTIPLE_OF = {"single_choice": False, "multiple_choice": True}
# The keys of a line in the pipeline's order (capabilities: added last by the tagging step).
KEY_ORDER = (
    "scene_id",
    "category",
    "question_id",
    "state_type",
    "question",
    "options",
    "answer",
    "question_type",
    "subcategory",
    "generator_name",
    "hallucination",
    "capabilities",
)
MAPPED = ("state_type", "question", "options", "answer", "hallucination")
_SHOWN_PROBLEMS = 10
_MAX_LINE = 1 << 20


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _capability(name: str) -> str | None:
    """The protocol's capability for an author's name (case and spacing aside), or None."""
    key = " ".join(name.split()).lower()
    return CAPABILITY_OF.get(key) or (key if key in CAPABILITIES else None)


def _option_text(option: str, index: int) -> tuple[str, bool]:
    """An option without its "A. " prefix, and whether it had one."""
    prefix = f"{LETTERS[index]}."
    if option.startswith(prefix):
        return option[len(prefix) :].strip(), True
    return option.strip(), False


def _answer_letters(answer: Any) -> list[str] | None:
    if isinstance(answer, str):
        answer = [answer]
    if not isinstance(answer, list) or not answer or not all(isinstance(a, str) and a.strip() for a in answer):
        return None
    return [a.strip().upper() for a in answer]


def _line_problem(row: Any) -> str | None:
    if not isinstance(row, dict):
        return f"must be a JSON object, found {type(row).__name__}"
    missing = [k for k in ("scene_id", "question_id", "state_type", "question", "options", "answer") if k not in row]
    if missing:
        return f"missing {', '.join(missing)}"
    if not _is_folder_name(row["scene_id"]):
        return f"scene_id must be a scene folder's name, found {row['scene_id']!r}"
    if not isinstance(row["question_id"], str | int) or isinstance(row["question_id"], bool):
        return f"question_id must be a text, found {row['question_id']!r}"
    if row["state_type"] not in CONTEXT_OF:
        return f"state_type {row['state_type']!r} is neither intra-state nor inter-states"
    if not isinstance(row["question"], str) or not row["question"].strip():
        return "question must be a non-empty text"
    options = row["options"]
    if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) and o.strip() for o in options):
        return "options must be a list of at least 2 texts"
    if len(options) > len(LETTERS):
        return f"at most {len(LETTERS)} options"
    letters = _answer_letters(row["answer"])
    allowed = LETTERS[: len(options)]
    if letters is None or not all(a in allowed for a in letters) or len(set(letters)) != len(letters):
        return f"answer must list distinct option letters A–{allowed[-1]}, found {row['answer']!r}"
    caps = row.get("capabilities")
    if caps is not None and not (isinstance(caps, list) and all(isinstance(c, str) for c in caps)):
        return "capabilities must be a list of names"
    if "hallucination" in row and not isinstance(row["hallucination"], bool | None):
        return "hallucination must be true or false"
    return None


def _convert(row: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """The item line of one readable row, what to count of it (for the notes) and its capability
    names outside the protocol's."""
    findings: list[str] = []
    unknown: list[str] = []
    scene = row["scene_id"]
    question_id = str(row["question_id"])
    ident = question_id if question_id.startswith(f"{scene}-") else f"{scene}-{question_id}"
    options, prefixed = zip(*(_option_text(o, i) for i, o in enumerate(row["options"])), strict=True)
    if all(prefixed):
        findings.append("prefixed")
    line: dict[str, Any] = {
        "id": ident,
        "video_before": f"{scene}/{VIDEOS[0]}",
        "video_after": f"{scene}/{VIDEOS[1]}",
        "question": row["question"],
        "options": list(options),
        "answer": sorted(set(_answer_letters(row["answer"]) or [])),
        "context": CONTEXT_OF[row["state_type"]],
    }
    if row.get("capabilities") is not None:
        mapped = set()
        for name in row["capabilities"]:
            short = _capability(name)
            if short is None:
                unknown.append(name)
            else:
                mapped.add(short)
        if mapped:
            line["capabilities"] = [c for c in CAPABILITIES if c in mapped]
        else:
            findings.append("no_capability")
    else:
        findings.append("untagged")
    if isinstance(row.get("hallucination"), bool):
        line["hallucination"] = row["hallucination"]
    multiple = MULTIPLE_OF.get(row.get("question_type"))
    if multiple is not None:
        line["multiple"] = multiple
    line["extra"] = {k: v for k, v in row.items() if k not in MAPPED}
    return line, findings, unknown


def _first_line(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if raw.strip():
                    return raw[:_MAX_LINE]
                if fh.tell() > _MAX_LINE:
                    break
    except OSError:
        pass
    return b""


def _media_root(path: Path, lines: list[dict[str, Any]], given: Path | None) -> tuple[Path | None, str | None]:
    """The data folder the videos are in: the one given, else the file's folder, the ``data``
    folder beside the file's folder (the pipeline's QAs/ and data/) or inside it, whichever holds
    the first scene's folder."""
    if given is not None:
        return given, None
    scene = lines[0]["extra"]["scene_id"] if lines else None
    for folder in (path.parent, path.parent.parent / DATA_FOLDER, path.parent / DATA_FOLDER):
        if scene and (folder / scene).is_dir():
            return folder, f"videos found under {folder.name or folder}/<scene_id>/"
    return None, None


class M3VersePipeline(ReleaseFormat):
    name = "m3verse-pipeline"
    label = "M3-Verse QA lines (Wal-K-aWay/M3-Verse_pipeline)"
    kind = "items"
    writes = True

    def detect(self, path: Path) -> bool:
        if not path.is_file():
            return False
        try:
            first = json.loads(_first_line(path))
        except ValueError:
            return False
        return isinstance(first, dict) and {"scene_id", "question_id", "state_type", "options"} <= set(first)

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        problems: list[str] = []
        lines: list[dict[str, Any]] = []
        seen: dict[str, tuple[int, Any]] = {}
        duplicates: list[str] = []
        stats: Counter[str] = Counter()
        unknown_caps: Counter[str] = Counter()
        contexts: Counter[str] = Counter()
        try:
            with open(path, encoding="utf-8-sig") as fh:
                for number, text in enumerate(fh, start=1):
                    if not text.strip():
                        continue
                    try:
                        row = json.loads(text)
                    except json.JSONDecodeError as exc:
                        problems.append(f"line {number}: not JSON ({exc.msg})")
                        continue
                    problem = _line_problem(row)
                    if problem is not None:
                        problems.append(f"line {number}: {problem}")
                        continue
                    line, findings, unknown = _convert(row)
                    earlier = seen.get(line["id"])
                    if earlier is not None:
                        if earlier[1] == row:
                            duplicates.append(f"line {number} repeats line {earlier[0]}")
                        else:
                            problems.append(f"line {number}: question {line['id']} already came on line {earlier[0]}")
                        continue
                    seen[line["id"]] = (number, row)
                    contexts[line["context"]] += 1
                    stats.update(findings)
                    unknown_caps.update(unknown)
                    lines.append(line)
        except UnicodeDecodeError as exc:
            raise FormatRefused(f"{path.name}: not UTF-8 text ({exc.reason})") from exc
        if problems:
            more = len(problems) - _SHOWN_PROBLEMS
            raise FormatRefused(
                f"{path.name}: {len(problems)} QA lines cannot be read: {'; '.join(problems[:_SHOWN_PROBLEMS])}"
                + (f" (and {more} more)" if more > 0 else "")
            )
        if not lines:
            raise FormatRefused(f"{path.name}: no QA lines; expected the pipeline's JSON lines, one question each")
        root, found_where = _media_root(path, lines, media_root)
        notes = [
            f"{len(lines)} questions read: {contexts['intra']} intra-state, {contexts['inter']} inter-states",
            "state_type mapped to context; the 'A. ' prefixes taken off the options "
            f"({_count(stats['prefixed'], 'question')} had them); question_type mapped to multiple",
            "videos <scene_id>/state_0.mp4 (before) and state_1.mp4 (after); ids from scene_id and question_id",
            "capability names mapped to spatial, temporal, attribute, reasoning; the authors' names and "
            "every other field kept in extra",
        ]
        if stats["untagged"]:
            carry = "carries" if stats["untagged"] == 1 else "carry"
            notes.append(
                f"{_count(stats['untagged'], 'question')} {carry} no capabilities (not yet through the tagging step)"
            )
        if stats["no_capability"]:
            notes.append(f"{_count(stats['no_capability'], 'question')} tagged with no known capability")
        if unknown_caps:
            names = ", ".join(f"{name!r} ({n})" for name, n in unknown_caps.most_common())
            notes.append(f"capability names outside the paper's four kept in extra only: {names}")
        if duplicates:
            notes.append(
                f"{_count(len(duplicates), 'line')} repeating another exactly, imported once ({'; '.join(duplicates)})"
            )
        if found_where:
            notes.append(found_where)
        return Conversion(lines=lines, media_root=root, notes=notes)

    def write(
        self,
        lines: Iterable[Mapping[str, Any]],
        out_dir: Path,
        *,
        open_media: Callable[[str], BinaryIO] | None = None,
    ) -> list[Path]:
        rows: list[dict[str, Any]] = []
        videos: dict[str, tuple[str, str]] = {}
        for line in lines:
            row = _row(line)
            pair = (line["video_before"], line["video_after"])
            if videos.setdefault(row["scene_id"], pair) != pair:
                raise FormatRefused(
                    f"item {line.get('id')}: scene {row['scene_id']} already has the videos {videos[row['scene_id']]}; "
                    "the pipeline keeps one pair of recordings per scene"
                )
            rows.append(row)
        target = out_dir / QA_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        written = [target]
        if open_media is not None:
            for scene, pair in videos.items():
                for rel, name in zip(pair, VIDEOS, strict=True):
                    written.append(copy_media(open_media, rel, out_dir / DATA_FOLDER / scene / name))
        return written


def _is_folder_name(name: Any) -> bool:
    return isinstance(name, str) and bool(name.strip()) and name not in (".", "..") and not set(name) & {"/", "\\"}


def _scene_of(line: Mapping[str, Any], extra: Mapping[str, Any]) -> str:
    scene = extra.get("scene_id")
    if _is_folder_name(scene):
        return scene
    folder = PurePosixPath(str(line.get("video_before") or "")).parent.name
    if _is_folder_name(folder):
        return folder
    raise FormatRefused(f"item {line.get('id')}: no scene_id (the pipeline names each scene's folder)")


def _row(line: Mapping[str, Any]) -> dict[str, Any]:
    """One item line back as the pipeline's QA line."""
    answer = line.get("answer")
    if not answer or not line.get("context"):
        raise FormatRefused(
            f"item {line.get('id')}: the pipeline's lines need an answer and a context; export verified items"
        )
    extra = dict(line.get("extra") or {})
    scene = _scene_of(line, extra)
    letters = sorted(answer) if isinstance(answer, list) else [answer]
    caps = line.get("capabilities")
    authors_caps = extra.get("capabilities")
    if caps is not None:
        kept = authors_caps if isinstance(authors_caps, list) else []
        if sorted({short for short in map(_capability, kept) if short}) != sorted(caps):
            authors_caps = [AUTHORS_CAPABILITY[c] for c in caps]  # changed since the import
    multiple = line.get("multiple")
    question_type = (
        ("multiple_choice" if multiple else "single_choice")
        if isinstance(multiple, bool)
        else extra.get("question_type", "multiple_choice" if len(letters) > 1 else "single_choice")
    )
    row: dict[str, Any] = {
        "scene_id": scene,
        "category": extra.get("category"),
        "question_id": extra["question_id"] if extra.get("question_id") is not None else line.get("id"),
        "state_type": STATE_TYPE_OF[line["context"]],
        "question": line["question"],
        "options": [f"{LETTERS[i]}. {text}" for i, text in enumerate(line["options"])],
        "answer": letters,
        "question_type": question_type,
        "subcategory": extra.get("subcategory"),
        "generator_name": extra.get("generator_name"),
        "hallucination": bool(line.get("hallucination", False)),
    }
    if authors_caps is not None:
        row["capabilities"] = authors_caps
    row.update({k: v for k, v in extra.items() if k not in KEY_ORDER})
    return row


FORMATS = (M3VersePipeline(),)
