"""A release as an lmms-eval task folder (`export_release … --format lmms-eval -o DIR`).

The folder is what lmms-eval 0.7's task loader reads with `--include_path DIR`:
- `<task>.yaml`: the task (`dataset_path: json` over `docs.jsonl`, which lmms-eval resolves
  relative to the YAML; `output_type: generate_until`; `process_results` and one metric per
  figure of the protocol's spec page, each aggregated by `utils.aggregate`);
- `utils.py`: a copy of `lmms_task_utils.py` (prompt, visuals, StateLab's answer parsing and
  scoring; standard library and Pillow only);
- `docs.jsonl`: one document per query the release asks, in release order (one per item for
  VisualTrans and M3-Verse, six per item for STATUS, up to four per item for ChangeIt: standard /
  distractor candidates × the full image / its box). Every document carries `id` (the item's id
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

import hashlib
import json
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from ..protocols import LETTERS, QUERY_KEYS, qa_shape

SUPPORTED = ("status", "changeit", "visualtrans", "m3verse")
DOCS = "docs.jsonl"
LABEL_OBJECTS = "label_objects.json"
CROPS = "statelab-crops"  # under media/: the ChangeIt box crops (a release path may not start with it)
UTILS_TEMPLATE = Path(__file__).with_name("lmms_task_utils.py")
_MEDIA_FIELDS = {"status": ("image_a", "image_b"), "changeit": ("image",), "visualtrans": ("images",),
                 "m3verse": ("video_before", "video_after")}

# (line, field, index in the field's list, relative path, target file) -> writes the file.
MediaWriter = Callable[[dict, str, int, str, Path], None]


class LmmsExportError(ValueError):
    """A release that cannot become an lmms-eval task (unsupported protocol, bad media path, …)."""


# --- prompts (StateLab's wording, as inference/protocols/*.py puts it, in one text block) --------

_STATUS_OSI = ("Look closely at the object in this photo. Which description matches the state it is in right now?\n"
               "{options}\nAnswer with the letter of the matching description (A or B) and nothing else.")
_STATUS_IR = ("Here are two photos, labelled A and B, of the same object (photo A is the first image, photo B the "
              "second). Which photo shows {state}?\nAnswer with the letter of the photo (A or B) and nothing else.")
_STATUS_SCI = ("The first photo was taken before and the second photo after something was done to an object. "
               "Which action turns the scene in the first photo into the scene in the second?\n"
               "{options}\nAnswer with the letter of the action ({letters}) and nothing else.")
_VT_INTRO = "The first image shows a scene before a transformation and the second image shows it afterwards."
_VT_REPLY = {
    "choice": "Answer with the letter of the correct option ({letters}) and nothing else.",
    "count": "Answer with a single whole number and nothing else.",
    "set": "List every correct answer, separated by commas, and nothing else.",
}
_M3_INTRO = ("You are shown two videos of the same place, the first recorded before and the second after some "
             "things in it changed. Compare them to answer the question.")
_M3_ONE = "Exactly one option is correct. Answer with its letter and nothing else."
_M3_ANY = ("One or more options may be correct. Answer with the letters of all correct options, separated by commas "
           "(for example A,C), and nothing else.")
_CHANGEIT = ("This photo shows {article} {object}. Which of these labels describes the state the {object} is in?\n"
             "{options}\nAnswer with the number of the best label (1 to {n}) and nothing else.")


def _lettered(options: list) -> str:
    return "\n".join(f"{LETTERS[i]}. {opt}" for i, opt in enumerate(options))


def _numbered(options: list) -> str:
    return "\n".join(f"{i + 1}. {opt}" for i, opt in enumerate(options))


def _media_path(path: Any) -> str:
    rel = PurePosixPath(str(path))
    if not str(path) or rel.is_absolute() or ".." in rel.parts:
        raise LmmsExportError(f"media path {path!r} is not a relative path inside the release")
    if rel.parts[0] == CROPS:
        raise LmmsExportError(f"media path {path!r}: {CROPS}/ holds the task's box crops")
    return "media/" + str(rel)


def crop_path(item_id: str) -> str:
    """Where an item's box crop lies in the task folder (readable, and unique per item id)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", item_id)[:60]
    return f"media/{CROPS}/{safe}-{hashlib.sha256(item_id.encode('utf-8')).hexdigest()[:8]}.png"


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


def _has_box(line: dict) -> bool:
    """Whether the item has a box to crop (not none, nor an annotator's outcome in its place)."""
    return isinstance(line.get("bbox"), list)


def _paths(value: Any) -> list[str]:
    return [_media_path(v) for v in (value if isinstance(value, list) else [value]) if v]


def _doc(line: dict, protocol: str, query: str, *, prompt: str, options: list, fmt: str, visuals: list[str],
         kind: str, target: Any, meta: dict) -> dict:
    return {
        "id": str(line["id"]), "query": query, "protocol": protocol, "split": line.get("split") or "test",
        "tags": [str(t) for t in line.get("tags") or []], "prompt": prompt, "options": [str(o) for o in options],
        "format": fmt, "visuals": visuals, "visual_kind": kind,
        "target": json.dumps(target, ensure_ascii=False), "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True),
    }


def task_documents(protocol: str, line: dict, settings: dict | None = None) -> list[dict]:
    """The documents of one release line: one per query, in QUERY_KEYS order."""
    resolved = line.get("resolved") or {}
    if protocol == "status":
        a, b = _paths(line["image_a"]), _paths(line["image_b"])
        meta = {"category": line.get("category"), "difference": line.get("difference")}
        docs = []
        for key in QUERY_KEYS["status"]:
            q = resolved[key]
            options = q["options"]
            if key in ("osi_a", "osi_b"):
                prompt, visuals = _STATUS_OSI.format(options=_lettered(options)), a if key == "osi_a" else b
            elif key in ("ir_a", "ir_b"):
                state = line["state_a"] if key == "ir_a" else line["state_b"]
                prompt, visuals, options = _STATUS_IR.format(state=state), a + b, ["photo A", "photo B"]
            else:
                letters = ", ".join(LETTERS[: len(options)])
                prompt, visuals = _STATUS_SCI.format(options=_lettered(options), letters=letters), a + b
            docs.append(_doc(line, protocol, key, prompt=prompt, options=options, fmt="choice", visuals=visuals,
                             kind="image", target=q["answer"], meta=meta))
        return docs
    if protocol == "changeit":
        obj = str(line["object"])
        full = _paths(line["image"])
        docs = []
        for key in QUERY_KEYS["changeit"]:
            _, strategy, condition = key.split(":")
            if condition == "crop" and not _has_box(line):
                continue  # inference fails this query: no document, scored as a missing answer
            q = resolved[key]
            options = q["options"]
            article = "an" if obj[:1].lower() in "aeiou" else "a"
            prompt = _CHANGEIT.format(article=article, object=obj, options=_numbered(options), n=len(options))
            meta = {"object": obj, "distractors": [str(d) for d in line.get("distractors") or []],
                    "strategy": strategy, "condition": condition}
            visuals = [crop_path(str(line["id"]))] if condition == "crop" else full
            docs.append(_doc(line, protocol, key, prompt=prompt, options=options, fmt="number", visuals=visuals,
                             kind="image", target=q["answer"], meta=meta))
        return docs
    if protocol == "visualtrans":
        q = resolved["qa"]
        options = q["options"]
        fmt = line.get("format") or ("choice" if options else "count")
        images = _paths(line.get("images") or [])
        labels = ["Image 1 (initial state)", "Image 2 (final state)"] + [
            f"Image {i + 1} (candidate)" for i in range(2, len(images))]
        prompt = f"{_VT_INTRO}\nThe images, in order: {', '.join(labels[: len(images)])}.\nQuestion: {line['question']}"
        if fmt == "choice":
            prompt += "\n" + _lettered(options) + "\n" + _VT_REPLY["choice"].format(letters=", ".join(LETTERS[: len(options)]))
        else:
            prompt += "\n" + _VT_REPLY[fmt]
        meta = {"subtask": line.get("subtask"), "scene": line.get("scene")}
        return [_doc(line, protocol, "qa", prompt=prompt, options=options, fmt=fmt, visuals=images, kind="image",
                     target=q["answer"], meta=meta)]
    if protocol == "m3verse":
        q = resolved["qa"]
        options = q["options"]
        rule = _M3_ANY if qa_shape(protocol=protocol, payload=line, project_settings=settings)["multiple"] else _M3_ONE
        prompt = f"{_M3_INTRO}\nQuestion: {line['question']}\n{_lettered(options)}\n{rule}"
        meta = {"context": line.get("context"), "capabilities": list(line.get("capabilities") or []),
                "hallucination": bool(line.get("hallucination"))}
        visuals = _paths(line["video_before"]) + _paths(line["video_after"])
        return [_doc(line, protocol, "qa", prompt=prompt, options=options, fmt="letters", visuals=visuals,
                     kind="video", target=q["answer"], meta=meta)]
    raise LmmsExportError(f"protocol {protocol!r} has no lmms-eval task (supported: {', '.join(SUPPORTED)})")


def task_name(header: dict) -> str:
    raw = f"statelab_{header.get('project') or 'release'}_{header.get('version') or ''}".lower()
    return re.sub(r"[^a-z0-9_]+", "_", raw).strip("_")


def _metrics(protocol: str, docs_meta: list[dict]) -> list[str]:
    """The metric keys this release has questions for (an empty breakdown is left out)."""
    if protocol == "status":
        keys = ["acc_osi", "acc_ir", "acc_sci", "oa", "racc_osi", "racc_ir", "racc_sci", "roa"]
    elif protocol == "changeit":
        # evaluation/scoring/changeit.py's KEYS: every column, also when no item has a box.
        keys = [f"{kind}_acc_{key.split(':')[1]}_{key.split(':')[2]}" for kind in ("state", "object")
                for key in QUERY_KEYS["changeit"]]
    elif protocol == "visualtrans":
        present = {m.get("subtask") for m in docs_meta}
        keys = []
        for sub, dim in (("fine_grained", None), ("global", "spatial_mean"), ("intermediate", None), ("causal", None),
                         ("planning", "procedural_mean"), ("quantitative", None)):
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
        order = (["overall", "intra", "inter"] + [f"{c}_{cap}" for c in ("intra", "inter")
                                                  for cap in ("spatial", "temporal", "attribute", "reasoning")]
                 + ["hallucination", "factual"])
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
        lines += [f"  - metric: {key}", "    aggregation: !function utils.aggregate",
                  f"    higher_is_better: {'false' if key in ('parse_failures', 'item') else 'true'}"]
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


def write_task(out: Path, header: dict, lines: Iterable[dict], *, settings: dict | None = None,
               media: MediaWriter | None = None, name: str | None = None) -> dict:
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
                        target = out / _media_path(rel)
                        if str(target) in written:
                            continue
                        target.parent.mkdir(parents=True, exist_ok=True)
                        media(line, field, index, str(rel), target)
                        written.add(str(target))
            if protocol == "changeit":
                vocabulary.setdefault(str(line["object"]), set()).add(str(line["state"]))
                if media is not None and _has_box(line):
                    docs, cropped = _crop_or_drop(out, line, docs)
                    crops += cropped
            for doc in docs:
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
                documents += 1
    if not items:
        raise LmmsExportError("the release has no items")
    if protocol == "changeit":
        (out / LABEL_OBJECTS).write_text(json.dumps(label_objects(vocabulary), ensure_ascii=False) + "\n",
                                         encoding="utf-8")
    metrics = _metrics(protocol, metas)
    (out / f"{name}.yaml").write_text(_yaml(name, protocol, metrics, header), encoding="utf-8")
    (out / "metrics.json").write_text(json.dumps(metrics) + "\n", encoding="utf-8")
    shutil.copyfile(UTILS_TEMPLATE, out / "utils.py")
    (out / "release.json").write_text(json.dumps({"release": header}, indent=2, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
    return {"task": name, "items": items, "documents": documents, "media": len(written) + crops, "folder": str(out)}


def _crop_or_drop(out: Path, line: dict, docs: list[dict]) -> tuple[list[dict], bool]:
    """Cut a ChangeIt item's box out of its image (written under out/media already); a box outside
    the image drops the crop documents instead, as inference fails those queries."""
    try:
        cropped = write_crop(out / _media_path(line["image"]), line["bbox"], out / crop_path(str(line["id"])))
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
