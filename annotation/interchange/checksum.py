"""A release's checksum: how it is computed at the freeze, recomputed from what the release
recorded, and checked against an exported zip (annotation/releases.py says what a release is).

SHA-256 over, each followed by a newline, the canonical serialization (JSON, sorted keys, no
spaces, UTF-8) of ``{"protocol", "split", "option_seed"}``, then of every export line in release
order, then (method ``lines+media``) of ``{"media": {relative path: sha256}}``: every media file the
release ships, at the path it ships under. So the checksum covers the bytes of the media too: a
zip export is checked by hashing the files it holds (`zip_checksum`). Releases frozen before media
were recorded (method ``lines``) cover the lines only.

The freeze hashes each line as it writes it, then ends with `checksum_finish_sorted`, fed the
media pairs read back from the database in path order, so it never holds the media map; the
bytes it hashes are those of `checksum_finish` (tests/annotation/test_freeze_set_based.py).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Iterable
from typing import IO, Any

LINES_AND_MEDIA = "lines+media"
LINES_ONLY = "lines"
METHOD_TEXT = {
    LINES_ONLY: "sha256(canonical {protocol, split, option_seed} + canonical item lines, newline-terminated)",
    LINES_AND_MEDIA: (
        "sha256(canonical {protocol, split, option_seed} + canonical item lines + canonical "
        "{media: {path: sha256 of the file shipped there}}, newline-terminated)"
    ),
}


# json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False), without making an
# encoder per call (json.dumps builds one whenever it is given options).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical(obj: Any) -> bytes:
    return _CANONICAL.encode(obj).encode("utf-8")


def checksum_start(*, protocol: str, split: str, option_seed: int):
    digest = hashlib.sha256()
    digest.update(canonical({"protocol": protocol, "split": split, "option_seed": option_seed}) + b"\n")
    return digest


def checksum_finish(digest, media: dict[str, str], *, method: str = LINES_AND_MEDIA) -> str:
    if method == LINES_AND_MEDIA:
        digest.update(canonical({"media": media}) + b"\n")
    return digest.hexdigest()


def checksum_finish_sorted(digest, pairs: Iterable[tuple[str, str]], *, method: str = LINES_AND_MEDIA) -> str:
    """`checksum_finish` from the media map's (path, sha256) pairs in ascending path order (code
    point order, as ``sort_keys`` sorts; PostgreSQL's ``COLLATE "C"`` on UTF-8 text is the same
    order), hashed as they come: the same bytes as ``canonical({"media": dict(pairs)})``."""
    if method == LINES_AND_MEDIA:
        digest.update(b'{"media":{')
        sep = b""
        for path, sha in pairs:
            digest.update(sep + f"{_CANONICAL.encode(path)}:{_CANONICAL.encode(sha)}".encode())
            sep = b","
        digest.update(b"}}\n")
    return digest.hexdigest()


def _sha256_member(zf: zipfile.ZipFile, name: str) -> str:
    digest = hashlib.sha256()
    with zf.open(name) as fh:
        while chunk := fh.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def zip_checksum(file: str | IO[bytes], media_fields: dict[str, str]) -> str:
    """The checksum of a release zip export (`release.json`, `items.jsonl`, the media files) from
    its own bytes: each media path its lines name is hashed as the zip holds it. Equal to the
    header's checksum when nothing in the zip was changed. `media_fields`: the protocol's media
    field names (annotation.protocols.MEDIA_FIELDS)."""
    with zipfile.ZipFile(file) as zf:
        header = json.loads(zf.read("release.json"))
        digest = checksum_start(protocol=header["protocol"], split=header["split"], option_seed=header["option_seed"])
        paths: set[str] = set()
        with zf.open("items.jsonl") as fh:
            for raw in fh:
                line = json.loads(raw)
                digest.update(canonical(line) + b"\n")
                for name in media_fields:
                    value = line.get(name)
                    paths.update(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str) and v)
        names = set(zf.namelist())
        media = {path: _sha256_member(zf, path) for path in sorted(paths) if path in names}
    method = LINES_AND_MEDIA if header.get("checksum_method") == METHOD_TEXT[LINES_AND_MEDIA] else LINES_ONLY
    return checksum_finish(digest, media, method=method)
