"""A release as an lmms-eval task folder (`export_release … --format lmms-eval -o DIR`).

The folder is what lmms-eval 0.7's task loader reads with `--include_path DIR`:
- `<task>.yaml`: the task (`dataset_path: json` over `docs.jsonl`, which lmms-eval resolves
  relative to the YAML; `output_type: generate_until`; `process_results` and one metric per
  figure of the protocol's spec page, each aggregated by `utils.aggregate`);
- `utils.py`: a copy of `lmms_task_utils.py` (prompt, visuals, StateLab's answer parsing and
  scoring; standard library and Pillow only);
- `docs.jsonl`: one document per query the release asks, in release order (`lmms_documents.py`:
  one per item for VisualTrans and M3-Verse, six per item for STATUS, up to four per item for
  ChangeIt: standard / distractor candidates × the full image / its box). Every document carries `id` (the item's id
  in the release) and `query` (StateLab's query key). lmms-eval 0.7.3 leaves `doc` out of its
  `--log_samples` file, so each logged sample also carries them as `item: {"id", "query"}` (the
  `item` metric: the number of items scored); then `protocol`, `split`, `tags`, `prompt`,
  `options` (in the release's frozen order), `format`, `visuals`, `visual_kind`, and `target` /
  `meta` as JSON text (their types vary between items, which a JSON-lines dataset cannot hold);
- `media/`: the images and videos, at the release's relative paths; for ChangeIt also each item's
  box cropped out at export time (`media/statelab-crops/`, a path no release may use), so utils.py
  only loads files;
- `metrics.json`: the metric keys the YAML lists (read by utils.py);
- `label_objects.json` (ChangeIt): label -> object, the vocabulary object accuracy is judged by
  (read by utils.py);
- `release.json`: the release header (protocol, version, item count, checksum, …).

The writer is plain Python (no Django): `write_task` takes the release header and its export
lines (`annotation.releases.release_lines`), plus an optional function that writes an item's
media file. `lmms_export(release, DIR)` is the Django side that feeds it from the database.

Protocols: STATUS, ChangeIt, VisualTrans and M3-Verse. OSCBench is refused: its score is the
agreement of a judge with human raters, not a model's score on a task.

ChangeIt, as StateLab's own runs ask it (inference/protocols/changeit.py): the crop is the image
made upright (EXIF), the box `[x, y, w, h]` rounded and clipped to it, as inference.media.load_image
cuts it; a crop query of an item with no box (none annotated, or `nothing_to_label` /
`cannot_determine` in its place) or with a box outside its image has no document, as inference
fails that query: utils.py then counts it wrong and a parse failure, as StateLab's scoring counts a
missing answer. Object accuracy judges the chosen label by the release's vocabulary (a state label
names the first object, in release order, that has it) or the item's own distractors, as
evaluation/scoring/runs.py's score_changeit does.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError

from ..protocols import QUERY_KEYS
from .lmms_documents import SUPPORTED, LmmsExportError, crop_path, has_box, media_path, task_documents

DOCS = "docs.jsonl"
LABEL_OBJECTS = "label_objects.json"
UTILS_TEMPLATE = Path(__file__).with_name("lmms_task_utils.py")
_MEDIA_FIELDS = {
    "status": ("image_a", "image_b"),
    "changeit": ("image",),
    "visualtrans": ("images",),
    "m3verse": ("video_before", "video_after"),
}

# (line, field, index in the field's list, relative path, target file) -> writes the file.
MediaWriter = Callable[[dict, str, int, str, Path], None]


def write_crop(source: Path, bbox: list, target: Path) -> bool:
    """Cut the box `[x, y, w, h]` (image pixels, clipped to the image) out of the upright image, as
    inference.media.load_image does, into a PNG; False (nothing written) when the box lies outside
    the image, where inference fails the query."""
    try:
        with Image.open(source) as img:
            img.load()
            image = ImageOps.exif_transpose(img).convert("RGB")
    except (OSError, UnidentifiedImageError) as exc:
        raise LmmsExportError(f"cannot read image {source.name} to crop its box: {exc}") from None
    x, y, w, h = (float(v) for v in bbox)
    left, top = max(0, int(round(x))), max(0, int(round(y)))
    right, bottom = min(image.width, int(round(x + w))), min(image.height, int(round(y + h)))
    if right <= left or bottom <= top:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    image.crop((left, top, right, bottom)).save(target, format="PNG")
    return True


def task_name(header: dict) -> str:
    raw = f"statelab_{header.get('project') or 'release'}_{header.get('version') or ''}".lower()
    return re.sub(r"[^a-z0-9_]+", "_", raw).strip("_")


def _metrics(protocol: str, docs_meta: list[dict]) -> list[str]:
    """The metric keys this release has questions for (an empty breakdown is left out)."""
    if protocol == "status":
        keys = ["acc_osi", "acc_ir", "acc_sci", "oa", "racc_osi", "racc_ir", "racc_sci", "roa"]
    elif protocol == "changeit":
        # evaluation/scoring/changeit.py's KEYS: every column, also when no item has a box.
        keys = [
            f"{kind}_acc_{key.split(':')[1]}_{key.split(':')[2]}"
            for kind in ("state", "object")
            for key in QUERY_KEYS["changeit"]
        ]
    elif protocol == "visualtrans":
        present = {m.get("subtask") for m in docs_meta}
        keys = []
        for sub, dim in (
            ("fine_grained", None),
            ("global", "spatial_mean"),
            ("intermediate", None),
            ("causal", None),
            ("planning", "procedural_mean"),
            ("quantitative", None),
        ):
            if sub in present:
                keys.append(sub)
            if dim == "spatial_mean" and present & {"fine_grained", "global"}:
                keys.append(dim)
            if dim == "procedural_mean" and present & {"intermediate", "causal", "planning"}:
                keys.append(dim)
        keys.append("overall")
    else:
        groups: set[str] = {"overall"}
        for m in docs_meta:
            groups.add(m.get("context") or "")
            groups.update(f"{m.get('context')}_{cap}" for cap in m.get("capabilities") or [])
            groups.add("hallucination" if m.get("hallucination") else "factual")
        order = (
            ["overall", "intra", "inter"]
            + [f"{c}_{cap}" for c in ("intra", "inter") for cap in ("spatial", "temporal", "attribute", "reasoning")]
            + ["hallucination", "factual"]
        )
        keys = [k for k in order if k in groups]
    return keys + ["parse_failures", "item"]


def _yaml(name: str, protocol: str, metrics: list[str], header: dict) -> str:
    max_tokens = {"visualtrans": 64}.get(protocol, 16)
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
        f"  max_new_tokens: {max_tokens}",
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
    no ChangeIt crops cut, so every boxed item keeps its crop documents)."""
    out = Path(out)
    protocol = header.get("protocol")
    if protocol not in SUPPORTED:
        raise LmmsExportError(f"protocol {protocol!r} has no lmms-eval task (supported: {', '.join(SUPPORTED)})")
    if out.exists() and any(out.iterdir()):
        raise LmmsExportError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    name = name or task_name(header)
    items = documents = crops = 0
    metas: list[dict] = []
    written: set[str] = set()
    vocabulary: dict[str, set[str]] = {}
    with open(out / DOCS, "w", encoding="utf-8") as fh:
        for line in lines:
            docs = task_documents(protocol, line, settings)
            items += 1
            metas.append(json.loads(docs[0]["meta"]))
            if media is not None:
                for field in _MEDIA_FIELDS[protocol]:
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
            if protocol == "changeit":
                vocabulary.setdefault(str(line["object"]), set()).add(str(line["state"]))
                if media is not None and has_box(line):
                    docs, cropped = _crop_or_drop(out, line, docs)
                    crops += cropped
            for doc in docs:
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
                documents += 1
    if not items:
        raise LmmsExportError("the release has no items")
    if protocol == "changeit":
        (out / LABEL_OBJECTS).write_text(
            json.dumps(label_objects(vocabulary), ensure_ascii=False) + "\n", encoding="utf-8"
        )
    metrics = _metrics(protocol, metas)
    (out / f"{name}.yaml").write_text(_yaml(name, protocol, metrics, header), encoding="utf-8")
    (out / "metrics.json").write_text(json.dumps(metrics) + "\n", encoding="utf-8")
    shutil.copyfile(UTILS_TEMPLATE, out / "utils.py")
    (out / "release.json").write_text(
        json.dumps({"release": header}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return {"task": name, "items": items, "documents": documents, "media": len(written) + crops, "folder": str(out)}


def _crop_or_drop(out: Path, line: dict, docs: list[dict]) -> tuple[list[dict], bool]:
    """Cut a ChangeIt item's box out of its image (written under out/media already); a box outside
    the image drops the crop documents instead, as inference fails those queries."""
    try:
        cropped = write_crop(out / media_path(line["image"]), line["bbox"], out / crop_path(str(line["id"])))
    except (TypeError, ValueError) as exc:
        raise LmmsExportError(f"item {line['id']}: box {line['bbox']!r} is not [x, y, w, h] ({exc})") from None
    return (docs if cropped else [d for d in docs if not d["query"].endswith(":crop")]), cropped


def label_objects(vocabulary: dict[str, set[str]]) -> dict[str, str]:
    """label -> object as StateLab's ChangeIt scoring judges a chosen label (runs._changeit_label_objects
    and changeit.label_object_map): objects in release order, each one's state labels sorted, the
    first object that has a label keeps it."""
    out: dict[str, str] = {}
    for obj, labels in vocabulary.items():
        for label in sorted(labels):
            out.setdefault(label, obj)
    return out


def folder_media(root: Path) -> MediaWriter:
    """Media read from a folder that holds them at their relative paths (a zip export's layout)."""
    root = Path(root)

    def copy(line: dict, field: str, index: int, rel: str, target: Path) -> None:
        shutil.copyfile(root / rel, target)

    return copy


def lmms_export(release, out: Path) -> dict:
    """Write `release` (a Release) as an lmms-eval task folder at `out`, media from the storage."""
    from .header import release_header
    from .hf import _lines, _MediaFiles, _shas

    media_files = _MediaFiles()
    current: dict[str, dict] = {}

    def lines():
        for line, media_map in _lines(release):
            current.clear()
            current.update(media_map)
            yield line

    def copy(line: dict, field: str, index: int, rel: str, target: Path) -> None:
        shas = _shas(current.get(field))
        if index >= len(shas):
            raise LmmsExportError(f"item {line.get('id')}: no stored media for {field} {rel!r}")
        media_files.load({shas[index]})
        media_files.copy_to(shas[index], target)

    settings = release.project.settings or {}
    return write_task(Path(out), release_header(release), lines(), settings=settings, media=copy)
