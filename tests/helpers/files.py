"""Files a test writes for an import to read: JSON-lines files and a polyglot image."""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path

from PIL import Image

# What a hostile import hides in a file: run in a viewer's session, it would read their account.
XSS_SCRIPT = b"<script>fetch('/api/me/').then(r => r.text()).then(t => document.title = t)</script>"


def write_lines(path: Path, lines: list) -> Path:
    """One line per entry: a str as written (a malformed line), anything else as JSON."""
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), encoding="utf-8"
    )
    return path


def write_predictions(folder: Path, lines: list, name: str = "preds.jsonl") -> str:
    """`write_lines` into `folder`, returning the path as the command line takes it."""
    return str(write_lines(folder / name, lines))


def polyglot_png() -> bytes:
    """A valid PNG whose text chunk holds an HTML script (what the attacker imported as poly.html)."""
    out = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(out, "PNG")
    png = out.getvalue()
    body = b"Comment\x00" + XSS_SCRIPT
    chunk = len(body).to_bytes(4, "big") + b"tEXt" + body + zlib.crc32(b"tEXt" + body).to_bytes(4, "big")
    return png[:33] + chunk + png[33:]  # after the IHDR chunk
