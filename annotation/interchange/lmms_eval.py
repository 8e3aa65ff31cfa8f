"""A release as an lmms-eval task folder (`export_release … --format lmms-eval -o DIR`).

The folder is what lmms-eval 0.7's task loader reads with `--include_path DIR`:
- `<task>.yaml`: the task (`dataset_path: json` over `docs.jsonl`, which lmms-eval resolves
  relative to the YAML; `output_type: generate_until`; `process_results` and one metric per
  figure of the protocol's spec page, each aggregated by `utils.aggregate`);
- `utils.py`: one standalone file (standard library and Pillow only): the generic part
  (protocols/kit/lmms_utils.py: visuals, prompt, StateLab's answer parsing, records and
  aggregation) with the protocol's own scoring appended (`protocols/<name>/lmms_utils.py`);
- `docs.jsonl`: one document per query the release asks, in release order, as the protocol's
  lmms-eval task makes them (`protocols/<name>/lmms.py`, on protocols/kit/lmms.py). Every document
  carries `id` (the item's id in the release) and `query` (StateLab's query key). lmms-eval 0.7.3
  leaves `doc` out of its `--log_samples` file, so each logged sample also carries them as
  `item: {"id", "query"}` (the `item` metric: the number of items scored); then `protocol`,
  `split`, `tags`, `prompt`, `options` (in the release's frozen order), `format`, `visuals`,
  `visual_kind`, and `target` / `meta` as JSON text (their types vary between items, which a
  JSON-lines dataset cannot hold);
- `media/`: the images and videos, at the release's relative paths, and what the protocol derives
  from them at export time (box crops under `media/statelab-crops/`, a path no release may use),
  so utils.py only loads files;
- `metrics.json`: the metric keys the YAML lists (read by utils.py);
- the files the protocol's scoring reads (`LmmsTask.files`, e.g. a release-wide vocabulary);
- `release.json`: the release header (protocol, version, item count, checksum, …).

A protocol has an lmms-eval task when it names one (`Protocol.lmms_module`, protocols/base.py);
one without (a protocol whose score is not a model's score on a task, e.g. a judge's agreement with
human raters) is refused.

The writer is plain Python (no Django): `write_task` takes the release header and its export
lines (`annotation.releases.release_lines`), plus an optional function that writes an item's
media file. `lmms_export(release, DIR)` is the Django side that feeds it what the release froze.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from protocols import registry
from protocols.kit.lmms import LmmsExportError, LmmsTask, crop_path, media_path

__all__ = ["LmmsExportError", "crop_path", "folder_media", "lmms_export", "lmms_task", "task_name", "write_task"]

DOCS = "docs.jsonl"

# (line, field, index in the field's list, relative path, target file) -> writes the file.
MediaWriter = Callable[[dict, str, int, str, Path], None]


def lmms_task(protocol_name: str | None, settings: dict | None = None) -> LmmsTask:
    """The protocol's lmms-eval task; LmmsExportError for a protocol that has none."""
    supported = [p.name for p in registry.protocols() if p.lmms_module]
    try:
        protocol = registry.get(protocol_name)
    except registry.UnknownProtocol:
        protocol = None
    if protocol is None or not protocol.lmms_module:
        raise LmmsExportError(f"protocol {protocol_name!r} has no lmms-eval task (supported: {', '.join(supported)})")
    return protocol.lmms.Task(protocol, settings)


def task_name(header: dict) -> str:
    raw = f"statelab_{header.get('project') or 'release'}_{header.get('version') or ''}".lower()
    return re.sub(r"[^a-z0-9_]+", "_", raw).strip("_")


def _yaml(name: str, protocol: str, metrics: list[str], header: dict, max_new_tokens: int) -> str:
    lines = [
        f"# StateLab release {json.dumps(header.get('project'))} {json.dumps(header.get('version'))} "
        f"({protocol}, {header.get('item_count')} items, sha256 {header.get('checksum')})",
        f"task: {name}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {DOCS}",
        "test_split: test",
        "output_type: generate_until",
        "doc_to_visual: !function utils.doc_to_visual",
        "doc_to_text: !function utils.doc_to_text",
        "doc_to_target: !function utils.doc_to_target",
        "process_results: !function utils.process_results",
        "generation_kwargs:",
        f"  max_new_tokens: {max_new_tokens}",
        "  temperature: 0",
        "  do_sample: false",
        "metric_list:",
    ]
    for key in metrics:
        lines += [
            f"  - metric: {key}",
            "    aggregation: !function utils.aggregate",
            f"    higher_is_better: {'false' if key in ('parse_failures', 'item') else 'true'}",
        ]
    lines += [
        "lmms_eval_specific_kwargs:",
        "  default:",
        '    pre_prompt: ""',
        '    post_prompt: ""',
        "metadata:",
        "  version: 1",
        f"  statelab_protocol: {protocol}",
        f"  statelab_checksum: {json.dumps(header.get('checksum'))}",
        "",
    ]
    return "\n".join(lines)


def write_task(
    out: Path,
    header: dict,
    lines: Iterable[dict],
    *,
    settings: dict | None = None,
    media: MediaWriter | None = None,
    name: str | None = None,
) -> dict:
    """Write the task folder at `out` (created; must be empty or absent). `lines` are the release's
    export lines in release order; `media` writes one media file (left out: no media copied, and
    nothing derived from them: documents that need a derived file are all kept)."""
    out = Path(out)
    protocol = header.get("protocol")
    task = lmms_task(protocol, settings)
    if out.exists() and any(out.iterdir()):
        raise LmmsExportError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    name = name or task_name(header)
    items = documents = derived = 0
    metas: list[dict] = []
    written: set[str] = set()
    with open(out / DOCS, "w", encoding="utf-8") as fh:
        for line in lines:
            docs = task.documents(line)
            items += 1
            metas.append(json.loads(docs[0]["meta"]))
            if media is not None:
                for field in task.media_fields:
                    value = line.get(field)
                    for index, rel in enumerate(value if isinstance(value, list) else [value]):
                        if not rel:
                            continue
                        target = out / media_path(rel)
                        if str(target) in written:
                            continue
                        target.parent.mkdir(parents=True, exist_ok=True)
                        media(line, field, index, str(rel), target)
                        written.add(str(target))
                docs, made = task.add_media(out, line, docs)
                derived += made
            for doc in docs:
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
                documents += 1
    if not items:
        raise LmmsExportError("the release has no items")
    for file_name, text in task.files().items():
        (out / file_name).write_text(text, encoding="utf-8")
    metrics = task.metrics(metas) + ["parse_failures", "item"]
    (out / f"{name}.yaml").write_text(_yaml(name, protocol, metrics, header, task.max_new_tokens), encoding="utf-8")
    (out / "metrics.json").write_text(json.dumps(metrics) + "\n", encoding="utf-8")
    (out / "utils.py").write_text(task.utils_source(), encoding="utf-8")
    (out / "release.json").write_text(
        json.dumps({"release": header}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return {"task": name, "items": items, "documents": documents, "media": len(written) + derived, "folder": str(out)}


def folder_media(root: Path) -> MediaWriter:
    """Media read from a folder that holds them at their relative paths (a zip export's layout)."""
    root = Path(root)

    def copy(line: dict, field: str, index: int, rel: str, target: Path) -> None:
        shutil.copyfile(root / rel, target)

    return copy


def lmms_export(release, out: Path) -> dict:
    """Write `release` (a Release) as an lmms-eval task folder at `out`: the lines, media and
    project settings as the release froze them (annotation/interchange/frozen.py)."""
    from .frozen import StoredMedia, frozen_project, frozen_rows
    from .header import release_header

    media_files = StoredMedia()
    current: dict[str, str] = {}

    def lines():
        for _, line, media_map in frozen_rows(release):
            current.clear()
            current.update(media_map)
            yield line

    def copy(line: dict, field: str, index: int, rel: str, target: Path) -> None:
        sha = current.get(rel)
        if sha is None:
            raise LmmsExportError(f"item {line.get('id')}: no stored media for {field} {rel!r}")
        media_files.copy_to(sha, target)

    settings = frozen_project(release)["settings"] or {}
    return write_task(Path(out), release_header(release), lines(), settings=settings, media=copy)
