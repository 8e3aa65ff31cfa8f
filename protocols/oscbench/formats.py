"""The OSCBench authors' files (docs/protocols/oscbench.md, "The authors' files"), read as the
project's own lines (protocols/kit/releases.py). Plain Python (no Django).

- ``oscbench-prompts`` (items, writes): the prompt splits, the taxonomy and one folder of generated
  videos per generator (release_layout.py): an item per video; a release is written back in that
  layout by writing.py.
- ``oscbench-mean3`` (annotations): the human rating files ``evaluations-<i>-mean3.json``, each
  video's scores the mean of its three raters, imported as aggregated ratings.
- ``oscbench-mllm-eval`` (predictions): the judge script's output, one object per video, as
  judge predictions.

Ratings and judge output name videos by file name; the release folder (its prompt splits and
video folders) ties a name to its item, as for the items.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from protocols.kit.answers import parse_judge
from protocols.kit.releases import Conversion, FormatRefused, ReleaseFormat, first_bytes

from .fields import AUTHOR_CODES, CRITERIA, NULLABLE, SCENARIOS
from .release_layout import Layout, is_release_root, item_id, locate, read_layout, read_taxonomy, video_root
from .writing import write_release

MAX_LISTED = 5  # examples a note or a refusal names before "…"
_CODES = ", ".join(f"{code} → {criterion}" for code, criterion in AUTHOR_CODES.items())


def _listed(things: list[str]) -> str:
    shown = ", ".join(things[:MAX_LISTED])
    return shown + (", …" if len(things) > MAX_LISTED else "")


def _refuse_all(problems: list[str], what: str) -> None:
    if problems:
        raise FormatRefused(
            f"{len(problems)} {what}: "
            + "; ".join(problems[:MAX_LISTED])
            + ("; …" if len(problems) > MAX_LISTED else "")
        )


def _video_key(raw: str) -> str:
    """A video named in a ratings or judge file, as the authors' analysis compares them."""
    key = raw.strip()
    return key[:-4] if key.lower().endswith(".mp4") else key


class PromptSplits(ReleaseFormat):
    name = "oscbench-prompts"
    label = "OSCBench prompt splits, taxonomy and generated videos (hanxjing/OSCBench-code)"
    kind = "items"
    writes = True

    def detect(self, path: Path) -> bool:
        return Path(path).is_dir() and is_release_root(Path(path))

    def write(
        self,
        lines: Iterable[Mapping[str, Any]],
        out_dir: Path,
        *,
        open_media: Callable[[str], BinaryIO] | None = None,
    ) -> list[Path]:
        return write_release(lines, Path(out_dir), open_media=open_media)

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        path = Path(path)
        if not self.detect(path):
            raise FormatRefused(
                f"{path.name}: expected the authors' repository folder, holding prompt_splits/prompts_"
                "{regular,novel,compositional}.txt and action_object_taxonomy/; found "
                + ("a file" if path.is_file() else "a folder without them")
            )
        taxonomy = read_taxonomy(path)
        videos = video_root(path, media_root)
        layout = read_layout(path, videos)
        if not layout.pairs:
            stray = f" ({len(layout.unmatched)} .mp4 files spell no prompt line)" if layout.unmatched else ""
            raise FormatRefused(
                f"no video of a prompt line under {videos.name or videos}{stray}; expected one folder per "
                "generator of <number>_<prompt, spaces as underscores>_<two-letter code>.mp4 files"
            )
        tags = {p.number: taxonomy.tag(p.text) for p in layout.prompts}
        lines = []
        for video, prompt in layout.pairs:
            fields, extra, _ = tags[prompt.number]
            lines.append(
                {
                    "id": item_id(video.generator, prompt),
                    "video": video.path,
                    "prompt": prompt.text,
                    "generator": video.generator,
                    "scenario": prompt.split,
                    **fields,
                    "extra": {"prompt_line": prompt.line, "prompts_txt_line": prompt.number, "video_name": video.stem}
                    | ({"video_code": video.code} if video.code else {})
                    | extra,
                }
            )
        return Conversion(lines=lines, media_root=videos, notes=_prompt_notes(layout, tags, len(lines)))


def _prompt_notes(layout: Layout, tags: dict[int, tuple], n_items: int) -> list[str]:
    prompts = layout.prompts
    per_split = Counter(p.split for p in prompts)
    texts = Counter(p.text for p in prompts)
    repeated = {t: n for t, n in texts.items() if n > 1}
    per_generator = Counter(v.generator for v, _ in layout.pairs)
    notes = [
        f"prompt splits: {len(prompts)} lines ({', '.join(f'{s} {per_split[s]}' for s in SCENARIOS)}), "
        f"{len(texts)} distinct; prompts on more than one line: {len(repeated)} ({sum(repeated.values())} lines), "
        "a video of one goes to the line its number names, else to the next line without a video",
        f"{n_items} items, one per video, from {len(per_generator)} generators "
        f"({', '.join(f'{g} {n}' for g, n in sorted(per_generator.items()))}); id <generator>:<split>:<line>",
        "mapped: prompt (the split file's line), scenario (its split), generator (the video's folder), action, "
        "object and their categories (action_object_taxonomy/; object_category the top category, its subcategory "
        "under extra); the video's file name, number and code under extra",
    ]
    where = {p.number: f"{p.split} {p.line}" for p in prompts}
    for finding, what in (
        ("two objects", "two taxonomy objects (the one not after “the” is taken, both kept under extra.objects)"),
        ("no object", "no taxonomy object (the item has no object)"),
        ("no action", "no taxonomy action (the item has no action)"),
    ):
        found = [where[n] for n, (_, _, findings) in tags.items() if finding in findings]
        if found:
            notes.append(f"prompt lines naming {what}: {len(found)}, {_listed(found)}")
    two_actions = sum(1 for fields, _, _ in tags.values() if " and " in fields.get("action", ""))
    if two_actions:
        notes.append(
            f"prompt lines naming two actions: {two_actions}; their action reads “peeling and slicing”, their "
            "action_category “Peeling + Cutting” (a group of its own in the action-category breakdown)"
        )
    have = {(v.generator, p.number) for v, p in layout.pairs}
    for generator in sorted(per_generator):
        missing = [where[p.number] for p in prompts if (generator, p.number) not in have]
        if missing:
            notes.append(
                f"videos missing: {generator} has none for {len(missing)} of {len(prompts)} prompt lines: "
                + _listed(missing)
            )
    if layout.unmatched:
        notes.append(
            f"videos spelling no prompt line, not imported: {len(layout.unmatched)}, "
            + _listed([v.path for v in layout.unmatched])
        )
    if layout.surplus:
        notes.append(
            "videos of a prompt line that already has a video of their generator, not imported: "
            f"{len(layout.surplus)}, {_listed([v.path for v in layout.surplus])}"
        )
    return notes


def _items_by_video(layout: Layout) -> dict[str, str]:
    ids: dict[str, str] = {}
    twice = []
    for stem, found in layout.by_stem().items():
        if len(found) > 1:
            twice.append(f"{stem} ({', '.join(found)})")
        ids[stem] = found[0]
    _refuse_all(twice, "video names are in more than one generator folder, so their ratings cannot be placed")
    return ids


def _read_json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise FormatRefused(f"{path.name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise FormatRefused(
            f"{path.name}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None


def _mean(value: Any) -> tuple[bool, float | None]:
    """(readable, mean) of one value of a rating file: "3.67", "4", 4.0; "NA", "" or null is no mean."""
    if value is None or (isinstance(value, str) and value.strip().upper() in ("", "NA", "N/A")):
        return True, None
    if isinstance(value, bool):
        return False, None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False, None
    return (1 <= number <= 5), number


class MeanRatings(ReleaseFormat):
    """The rating files the authors' analysis script reads: per file, video -> {"evaluations":
    {code: mean}}, the mean of the video's three raters (as text; "NA" where none gave a number)."""

    name = "oscbench-mean3"
    label = "OSCBench human ratings, mean of three raters (evaluations-<i>-mean3.json)"
    kind = "annotations"
    raters = 3
    file_name = re.compile(r"^evaluations-(\d+)-mean3\.json$", re.IGNORECASE)

    def _files(self, path: Path) -> list[Path]:
        if path.is_dir():
            found = [p for p in path.iterdir() if p.is_file() and self.file_name.match(p.name)]
            return sorted(found, key=lambda p: int(self.file_name.match(p.name).group(1)))
        return [path] if path.is_file() else []

    def detect(self, path: Path) -> bool:
        path = Path(path)
        if path.is_dir():
            return bool(self._files(path))
        head = first_bytes(path).lstrip(b"\xef\xbb\xbf \t\r\n")
        return bool(self.file_name.match(path.name)) or (head[:1] == b"{" and b'"evaluations"' in head)

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        path = Path(path)
        files = self._files(path)
        if not files:
            raise FormatRefused(
                f"{path.name}: no rating file; expected evaluations-<i>-mean3.json files (or one of them)"
            )
        root, videos = locate(path, media_root)
        items = _items_by_video(read_layout(root, videos))
        problems: list[str] = []
        first: dict[str, tuple[str, dict]] = {}  # video -> (file, scores)
        lines: list[dict[str, Any]] = []
        not_in_release: list[str] = []
        same_twice: list[str] = []
        no_mean = Counter()
        for file in files:
            data = _read_json_file(file)
            if not isinstance(data, dict):
                raise FormatRefused(
                    f"{file.name}: found a JSON {type(data).__name__}; expected an object video name -> "
                    '{"evaluations": {"1a": "3.67", …}}'
                )
            rater = file.name[: -len(".json")]
            for raw_key, entry in data.items():
                video = _video_key(raw_key)
                where = f"{file.name}: video {video!r}"
                evaluations = entry.get("evaluations") if isinstance(entry, dict) else None
                if not isinstance(evaluations, dict):
                    problems.append(f'{where}: expected {{"evaluations": {{code: mean}}}}')
                    continue
                unknown = sorted(set(evaluations) - set(AUTHOR_CODES))
                if unknown:
                    problems.append(
                        f"{where}: unknown criterion codes {', '.join(unknown)} (known: {', '.join(AUTHOR_CODES)})"
                    )
                    continue
                scores: dict[str, float | None] = {}
                for code, criterion in AUTHOR_CODES.items():
                    readable, mean = _mean(evaluations.get(code))
                    if not readable:
                        problems.append(f"{where}: {code}: {evaluations.get(code)!r} is not a mean from 1 to 5 or NA")
                    scores[criterion] = mean
                    if mean is None and criterion not in NULLABLE:
                        no_mean[code] += 1
                if video in first:
                    if first[video][1] != scores:
                        problems.append(f"{where}: rated again with other means (first in {first[video][0]})")
                    else:
                        same_twice.append(f"{video} ({first[video][0]}, {file.name})")
                    continue
                first[video] = (file.name, scores)
                if video not in items:
                    not_in_release.append(video)
                    continue
                lines.append(
                    {"item": items[video], "rater": rater, "scores": scores, "aggregate": {"raters": self.raters}}
                )
        _refuse_all(problems, "ratings cannot be read")
        if not lines:
            raise FormatRefused(
                f"none of the {len(first)} rated videos is among the release's videos under {videos}; "
                "expected their names (without .mp4) to be video file names of the generator folders"
            )
        notes = [
            f"{len(lines)} ratings read from {len(files)} files ({', '.join(f.name for f in files[:3])}"
            f"{', …' if len(files) > 3 else ''}), each the mean of the video's {self.raters} raters, stored as "
            "aggregated ratings: τ and ρ against judges use them; Krippendorff's α and leave-one-rater-out need "
            "per-rater ratings",
            f"criteria: {_CODES}; NA → N/A; a rater id per file ({', '.join(f.name[:-5] for f in files[:3])}"
            f"{', …' if len(files) > 3 else ''})",
            "the means are kept as written (the authors' analysis script reads “3.67” as 3, cutting the fraction)",
        ]
        if no_mean:
            notes.append(
                "no mean (NA) on criteria only subject and scene leave out for a single rater: "
                + ", ".join(f"{code} {n} videos" for code, n in sorted(no_mean.items()))
            )
        if same_twice:
            notes.append(
                f"videos rated in two files with the same means, imported once: {len(same_twice)}, "
                + _listed(same_twice)
            )
        if not_in_release:
            notes.append(
                f"rated videos that are not among the release's videos, not imported: {len(not_in_release)}, "
                + _listed(not_in_release)
            )
        return Conversion(lines=lines, notes=notes)


class JudgeOutput(ReleaseFormat):
    """The authors' judge script's output: JSON lines {"video_folder", "prompt", "result": {code:
    {"evidence", "score"}}, "usage", "elapsed_sec"}; also the video-keyed JSON their analysis
    script reads, {video: {"evaluation": {code: {"evidence", "score"} or score}}}."""

    name = "oscbench-mllm-eval"
    label = "OSCBench MLLM judge output (mllm_eval.py)"
    kind = "predictions"

    def detect(self, path: Path) -> bool:
        head = first_bytes(Path(path)).lstrip(b"\xef\xbb\xbf \t\r\n")
        if head[:1] != b"{":
            return False
        first_line = head.split(b"\n", 1)[0]
        return (b'"video_folder"' in first_line and b'"result"' in first_line) or b'"evaluation"' in head

    def _records(self, path: Path) -> list[tuple[str, str, Any]]:
        """(where, video, result) per judged video, in the file's order."""
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FormatRefused(f"{path.name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, dict) and "video_folder" not in whole:
            if not all(isinstance(e, dict) and "evaluation" in e for e in whole.values()):
                raise FormatRefused(
                    f'{path.name}: a JSON object, but not video -> {{"evaluation": {{code: …}}}} throughout'
                )
            return [(f"video {k!r}", _video_key(k), e["evaluation"]) for k, e in whole.items()]
        records, problems = [], []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"line {n}: not valid JSON ({exc.msg})")
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("video_folder"), str) or "result" not in obj:
                problems.append(f'line {n}: expected {{"video_folder": …, "prompt": …, "result": {{code: …}}}}')
                continue
            records.append((f"line {n}", _video_key(obj["video_folder"]), obj["result"]))
        _refuse_all(problems, "lines of judge output cannot be read")
        return records

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        path = Path(path)
        if not path.is_file():
            raise FormatRefused(f"{path.name}: expected the judge script's output file (JSON lines)")
        records = self._records(path)
        root, videos = locate(path, media_root)
        items = _items_by_video(read_layout(root, videos))
        lines: list[dict[str, Any]] = []
        problems: list[str] = []
        seen: dict[str, tuple[str, Any]] = {}
        not_in_release, same_twice, dropped, unwrapped, unreadable = [], [], Counter(), 0, 0
        for where, video, result in records:
            if not isinstance(result, dict):
                problems.append(f"{where}: result is not an object code -> {{evidence, score}}")
                continue
            if video in seen:
                if seen[video][1] != result:
                    problems.append(
                        f"{where}: video {video!r} judged again with another result (first at {seen[video][0]})"
                    )
                else:
                    same_twice.append(video)
                continue
            seen[video] = (where, result)
            answer: dict[str, Any] = {}
            for code, node in result.items():
                criterion = AUTHOR_CODES.get(code)
                if criterion is None:
                    dropped[code] += 1
                    continue
                score = node.get("score") if isinstance(node, dict) else node
                # The script's template shows the score as "[1-5]"; a one-element list is that score.
                if isinstance(score, list) and len(score) == 1:
                    unwrapped += 1
                    node = {**node, "score": score[0]} if isinstance(node, dict) else score[0]
                answer[criterion] = node
            if video not in items:
                not_in_release.append(video)
                continue
            if parse_judge(answer, CRITERIA) is None:
                unreadable += 1
            lines.append({"item": items[video], "query": "judge", "answer": answer})
        _refuse_all(problems, "judged videos cannot be read")
        if not lines:
            raise FormatRefused(
                f"none of the {len(seen)} judged videos is among the release's videos under {videos}; "
                "expected each video_folder to be a video's file name without .mp4"
            )
        notes = [
            f"{len(lines)} judge answers from {path.name}, query judge; criteria: {_CODES}; "
            "the evidence is kept with each score",
            "the file names no model (the script's MODEL_NAME): name the judge when importing; usage, "
            "elapsed_sec and prompt are not kept",
        ]
        if unwrapped:
            notes.append(f"scores written as a one-element list, read as that score: {unwrapped}")
        if dropped:
            notes.append(
                "codes that are no criterion, left out: " + ", ".join(f"{c} ({n})" for c, n in sorted(dropped.items()))
            )
        if unreadable:
            notes.append(
                "answers holding a score that is not a whole number from 1 to 5 (or N/A), imported as unreadable "
                f"answers: {unreadable}"
            )
        if same_twice:
            notes.append(
                f"videos judged twice with the same result, imported once: {len(same_twice)}, {_listed(same_twice)}"
            )
        if not_in_release:
            notes.append(
                f"judged videos that are not among the release's videos, not imported: {len(not_in_release)}, "
                + _listed(not_in_release)
            )
        return Conversion(lines=lines, notes=notes)


FORMATS = (PromptSplits(), MeanRatings(), JudgeOutput())
