"""A release as a Hugging Face dataset folder, and such a folder imported back.

The folder `datasets.load_dataset(DIR)` loads as it is:
- `data/<hf split>-NNNNN-of-MMMMM.parquet`: one row per release item, in release order; columns
  `id`, every item field, `split`, `tags` and `resolved` (the option orders and candidates the
  release froze). Images are the `Image` feature (the bytes with their original path); videos
  stay files under `media/` with their relative path in a string column. A column whose values
  all have one simple type keeps it (string, int64, float64, bool, a list of strings or of
  int64); any other column (nested objects, mixed types such as a box that may be
  "nothing_to_label") is JSON text, listed in the card's `statelab.json_columns`. The features
  travel in each shard's `huggingface` schema metadata, as the `datasets` library writes them.
- `README.md`: the dataset card, YAML metadata (license, citation, protocol, version, item
  count, checksum, the configs entry for the shards) and a short description.

The Hugging Face split is the release's split renamed where `datasets` refuses it (see
`hf_split_name`); the StateLab split stays in the card's `statelab.split` and in each row's
`split` column, which is what an import reads, so a renamed split comes back as it was.

Importing the folder back (`import_items <project> DIR`) rebuilds the release's export lines and
media and imports them like a release export: the same items, fields and media bytes. A field
that was absent from an item comes back absent (Parquet cannot tell absent from null, so a null
value is read as absent).

pyarrow writes and reads the Parquet; the `datasets` library is needed only to load the folder.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from ..models import Release
from ..project_setup import project_setting
from ..protocols import MEDIA_FIELDS
from .frozen import StoredMedia, frozen_project, frozen_rows
from .header import release_header
from .stream_zip import StreamSink, zip_entry

CARD = "README.md"
_CARD_LINE = re.compile(r"^statelab: (\{.*\})$", re.MULTILINE)
# What `datasets` takes for a split name outside it (datasets.naming._split_re): word characters,
# and dots only between them.
_HF_SPLIT_BAD = re.compile(r"[^\w.]|(?<!\w)\.|\.(?!\w)")


def _arrow():
    """pyarrow, imported when a dataset folder is written or read: it costs every process that
    imports it about 75 MiB, and web and worker processes rarely need it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


ROWS_PER_SHARD = 1000


class HFFolderError(ValueError):
    """A folder that is not a StateLab dataset export, or one that is damaged."""


# --- export -------------------------------------------------------------------------------------


def hf_split_name(split: str) -> str:
    """The name `datasets` loads the split under. A StateLab split may hold `-` and dots anywhere,
    but `datasets` takes only `^\\w+(\\.\\w+)*$` and reserves `all` (in any case) for the union of
    the splits: each character it refuses becomes `_`, and `all` gets a trailing `_`. Names it
    takes stay as they are. A release holds one split, so two names never meet in one folder."""
    name = _HF_SPLIT_BAD.sub("_", split)
    return name + "_" if name.lower() == "all" else name


def _value_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64" if -(2**63) <= value < 2**63 else "json"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            return "list_string"
        if all(isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 for v in value):
            return "list_int64"
    return "json"


def _merge(a: str | None, b: str) -> str:
    if a is None or a == b:
        return b
    if {a, b} == {"int64", "float64"}:
        return "json"  # keep 3 and 3.0 apart: a float column would turn 3 into 3.0
    if {a, b} <= {"list_string", "list_int64"}:
        return "json"
    return "json"


def _lines(release: Release) -> Iterator[tuple[dict, dict]]:
    """(export line, {relative path: sha256}) in release order, as the release froze them."""
    for _, line, media in frozen_rows(release):
        yield line, media


def _column_types(release: Release) -> dict[str, str]:
    media = MEDIA_FIELDS[release.project.protocol]
    types: dict[str, str | None] = {"id": "string"}
    for line, _ in _lines(release):
        for name, value in line.items():
            if name in media:
                kind = "image" if media[name] == "image" else "video"
                types[name] = ("list_" + kind) if isinstance(value, list) else kind
                continue
            if value is None:
                types.setdefault(name, None)
                continue
            types[name] = _merge(types.get(name), _value_type(value))
    # A list column whose lists were all empty has no element type: JSON keeps it exact.
    return {name: (t or "string") for name, t in types.items()}


def _safe_relpath(path: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise HFFolderError(f"media path {path!r} is not a relative path inside the dataset")
    return rel


def _paths(value: Any) -> list[str]:
    return value if isinstance(value, list) else [value]


def _row(line: dict, media_map: dict, types: dict[str, str], media: StoredMedia, out: Path) -> dict:
    """One Parquet row; `media_map` is the line's frozen {relative path: sha256}."""
    row: dict[str, Any] = {}
    for name, kind in types.items():
        value = line.get(name)
        if value is None:
            row[name] = None
        elif kind in ("image", "list_image"):
            cells = [{"bytes": media.read(media_map[p]), "path": p} for p in _paths(value) if p in media_map]
            row[name] = cells if kind == "list_image" else cells[0]
        elif kind in ("video", "list_video"):
            for p in _paths(value):
                target = out / "media" / _safe_relpath(p)
                if p in media_map and not target.exists():
                    media.copy_to(media_map[p], target)
            row[name] = ["media/" + p for p in value] if kind == "list_video" else "media/" + value
        elif kind == "json":
            row[name] = json.dumps(value, ensure_ascii=False)
        else:
            row[name] = value
    return row


_VALUE = {
    "string": "string",
    "int64": "int64",
    "float64": "float64",
    "bool": "bool",
    "json": "string",
    "video": "string",
}


def _feature(kind: str) -> dict:
    """The `datasets` feature of a column kind, as the library writes it in a shard's metadata."""
    if kind in ("image", "list_image"):
        inner = {"_type": "Image"}
    else:
        inner = {"dtype": _VALUE[kind.removeprefix("list_")], "_type": "Value"}
    return {"_type": "List", "feature": inner} if kind.startswith("list_") else inner


def _arrow_type(kind: str):
    pa, _ = _arrow()
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    base = kind.removeprefix("list_")
    inner = (
        image
        if base == "image"
        else {
            "string": pa.string(),
            "int64": pa.int64(),
            "float64": pa.float64(),
            "bool": pa.bool_(),
            "json": pa.string(),
            "video": pa.string(),
        }[base]
    )
    return pa.list_(inner) if kind.startswith("list_") else inner


def _schema(types: dict[str, str]):
    pa, _ = _arrow()
    fields = [pa.field(name, _arrow_type(kind)) for name, kind in types.items()]
    features = {name: _feature(kind) for name, kind in types.items()}
    return pa.schema(fields).with_metadata({b"huggingface": json.dumps({"info": {"features": features}}).encode()})


def _yaml_text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML scalar


def _card(release: Release, types: dict[str, str], shards: int, hf_split: str) -> str:
    project = frozen_project(release)
    slug = project["slug"]
    settings = project["settings"] or {}
    header = release_header(release)
    meta = {
        **header,
        "columns": types,
        "json_columns": [n for n, t in types.items() if t == "json"],
        "image_columns": [n for n, t in types.items() if t in ("image", "list_image")],
        "video_columns": [n for n, t in types.items() if t in ("video", "list_video")],
        "shards": shards,
        "hf_split": hf_split,
    }
    split = release.split or "test"
    renamed = f" (the Hugging Face split `{hf_split}`)" if hf_split != split else ""
    citation = project_setting(settings, "citation", "", project=slug)
    lines = [
        "---",
        f"license: {_yaml_text(project_setting(settings, 'license', 'other', project=slug))}",
        f"pretty_name: {_yaml_text(project['name'] or slug)}",
        "tags:",
        "- statelab",
        "- object-states",
        f"- {_yaml_text(release.project.protocol)}",
        "configs:",
        "- config_name: default",
        "  data_files:",
        f"  - split: {_yaml_text(hf_split)}",
        f"    path: {_yaml_text(f'data/{hf_split}-*.parquet')}",
        f"statelab: {json.dumps(meta, ensure_ascii=False, sort_keys=True)}",
        "---",
        "",
        f"# {project['name'] or slug} — release {release.version}",
        "",
        (project["description"] or "").strip(),
        "",
        f"- Protocol: `{release.project.protocol}`; split `{split}`{renamed}; {release.item_count} items.",
        f"- Release checksum (sha256): `{release.checksum}`.",
        "- Images are stored in the Parquet shards (`Image` feature); videos are files under `media/`.",
        "- Columns listed in `statelab.json_columns` hold JSON text.",
        "",
    ]
    if citation:
        lines += ["## Citation", "", "```bibtex", citation.strip(), "```", ""]
    return "\n".join(lines)


def hf_export(release: Release, out: Path, *, rows_per_shard: int = ROWS_PER_SHARD) -> dict:
    """Write the release as a dataset folder at `out` (created; must be empty or absent)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise HFFolderError(f"{out} is not empty")
    (out / "data").mkdir(parents=True, exist_ok=True)
    types = _column_types(release)
    schema = _schema(types)
    split = hf_split_name(release.split or "test")
    total = release.item_count
    shards = max(1, -(-total // rows_per_shard))
    media = StoredMedia()
    batch: list[tuple[dict, dict]] = []
    shard = 0

    def flush() -> None:
        nonlocal shard, batch
        media.load({sha for _, m in batch for sha in m.values()})
        rows = [_row(line, m, types, media, out) for line, m in batch]
        pa, pq = _arrow()
        table = pa.Table.from_pylist(rows, schema=schema)
        pq.write_table(table, out / "data" / f"{split}-{shard:05d}-of-{shards:05d}.parquet")
        shard += 1
        batch = []

    for line, m in _lines(release):
        batch.append((line, m))
        if len(batch) >= rows_per_shard:
            flush()
    if batch or shard == 0:
        flush()
    (out / CARD).write_text(_card(release, types, shard, split), encoding="utf-8")
    return {"items": total, "shards": shard, "folder": str(out)}


# --- import -------------------------------------------------------------------------------------


def _inside(folder: Path, path: Path, what: str) -> Path:
    """`path` with every link followed, refused unless it still lies inside `folder` (also
    resolved): a link anywhere on the way (a linked folder in the middle of media/lnk/x.mp4, a
    linked shard or card) may not reach a file outside the dataset folder."""
    real = path.resolve()
    if not real.is_relative_to(folder.resolve()):
        raise HFFolderError(f"{what}: leads outside the dataset folder (a symbolic link); only its own files are read")
    return real


def is_hf_folder(path: Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / CARD).is_file() and (path / "data").is_dir()


def _card_meta(folder: Path) -> dict:
    text = _inside(folder, folder / CARD, f"{folder.name}/{CARD}").read_text(encoding="utf-8", errors="replace")
    found = _CARD_LINE.search(text.split("\n---", 1)[0] if text.startswith("---") else "")
    if not found:
        raise HFFolderError(f"{folder.name}/{CARD}: no `statelab:` metadata (not a StateLab dataset export)")
    try:
        meta = json.loads(found.group(1))
    except ValueError as exc:
        raise HFFolderError(f"{folder.name}/{CARD}: field statelab: not readable ({exc})") from exc
    if not isinstance(meta, dict) or not isinstance(meta.get("columns"), dict):
        raise HFFolderError(f"{folder.name}/{CARD}: field statelab.columns is missing")
    return meta


def hf_folder_to_jsonl(folder: Path, work: Path) -> Path:
    """Rebuild the export lines (a release JSONL with its header) and the media under `work`;
    returns the JSONL path (its media root is `work`)."""
    folder, work = Path(folder), Path(work)
    meta = _card_meta(folder)
    columns: dict[str, str] = meta["columns"]
    shards = [_inside(folder, shard, f"data/{shard.name}") for shard in sorted((folder / "data").glob("*.parquet"))]
    if not shards:
        raise HFFolderError(f"{folder.name}/data: no Parquet shards")
    header = {
        k: meta[k]
        for k in ("protocol", "project", "version", "split", "item_count", "checksum", "option_seed")
        if k in meta
    }
    pa, pq = _arrow()
    target = work / "items.jsonl"
    written: dict[str, int] = {}  # media path -> hash of the bytes written there (items share media)
    with open(target, "w", encoding="utf-8") as out:
        out.write(json.dumps({"release": header}) + "\n")
        for shard in shards:
            try:
                parquet = pq.ParquetFile(shard)
                unknown = set(parquet.schema_arrow.names) - set(columns)
                if unknown:
                    raise HFFolderError(
                        f"{shard.name}: column {sorted(unknown)[0]!r} is not in the card's statelab.columns"
                    )
                n = 0
                for batch in parquet.iter_batches(batch_size=500):
                    for row in batch.to_pylist():
                        n += 1
                        line = _line(row, columns, folder, work, f"{shard.name} row {n}", written)
                        out.write(json.dumps(line, ensure_ascii=False) + "\n")
            except (pa.ArrowException, OSError) as exc:
                raise HFFolderError(f"{shard.name}: not a readable Parquet file ({exc})") from exc
    return target


def _line(row: dict, columns: dict[str, str], folder: Path, work: Path, where: str, written: dict[str, int]) -> dict:
    line: dict[str, Any] = {}
    for name, value in row.items():
        if value is None:
            continue
        kind = columns[name]
        if kind in ("image", "list_image"):
            cells = value if kind == "list_image" else [value]
            paths = []
            for cell in cells:
                if not isinstance(cell, dict) or not cell.get("bytes") or not cell.get("path"):
                    raise HFFolderError(f"{where}: field {name}: an image needs its bytes and path")
                rel = _safe_relpath(cell["path"])
                digest = hash(cell["bytes"])
                if str(rel) not in written:
                    (work / rel).parent.mkdir(parents=True, exist_ok=True)
                    (work / rel).write_bytes(cell["bytes"])
                    written[str(rel)] = digest
                elif written[str(rel)] != digest:
                    raise HFFolderError(f"{where}: field {name}: two different images under one path {rel}")
                paths.append(str(rel))
            line[name] = paths if kind == "list_image" else paths[0]
        elif kind in ("video", "list_video"):
            values = value if kind == "list_video" else [value]
            paths = []
            for p in values:
                rel = _safe_relpath(p)
                if rel.parts[0] != "media" or len(rel.parts) < 2:
                    raise HFFolderError(f"{where}: field {name}: a video path lies under media/")
                source = _inside(folder, folder / rel, f"{where}: field {name}: {p}")
                if not source.is_file():
                    raise HFFolderError(f"{where}: field {name}: {p} is missing from the folder")
                inner = PurePosixPath(*rel.parts[1:])
                if str(inner) not in written:
                    (work / inner).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, work / inner)
                    written[str(inner)] = 0
                paths.append(str(inner))
            line[name] = paths if kind == "list_video" else paths[0]
        elif kind == "json":
            try:
                line[name] = json.loads(value)
            except (TypeError, ValueError) as exc:
                raise HFFolderError(f"{where}: field {name}: not JSON text") from exc
        else:
            line[name] = value
    return line


def hf_zip_parts(release: Release, *, flush_bytes: int = 256 * 1024) -> Iterator[bytes]:
    """The dataset folder as a streamed zip (the page's and API's download): written to a scratch
    folder first, removed when the stream ends or is abandoned."""
    work = Path(tempfile.mkdtemp(prefix="statelab-hf-export-"))
    try:
        hf_export(release, work / "dataset")
        sink = StreamSink()
        with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_STORED) as zf:
            for path in sorted(p for p in (work / "dataset").rglob("*") if p.is_file()):
                info = zip_entry(str(path.relative_to(work / "dataset")), stored=True)
                with open(path, "rb") as src, zf.open(info, "w", force_zip64=True) as dst:
                    while data := src.read(flush_bytes):
                        dst.write(data)
                        yield sink.drain()
        yield sink.drain()
    finally:
        shutil.rmtree(work, ignore_errors=True)
