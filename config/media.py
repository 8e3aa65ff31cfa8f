"""Serve uploaded media to signed-in users, with HTTP Range support so video players can seek.

Production can put media on object storage instead; this view is what the demo, the tests and a
single-machine deployment use. It reads settings.MEDIA_ROOT on every request.
"""
from __future__ import annotations

import mimetypes
import os
import re
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpResponse, StreamingHttpResponse

RANGE_RE = re.compile(r"bytes=(\d*)-(\d*)$")
CHUNK = 64 * 1024


def _resolve(path: str) -> Path:
    root = Path(settings.MEDIA_ROOT).resolve()
    target = (root / path).resolve()
    if root not in target.parents or not target.is_file():
        raise Http404("No such media file.")
    return target


def _iter_range(fh, start: int, length: int):
    with fh:
        fh.seek(start)
        remaining = length
        while remaining > 0:
            data = fh.read(min(CHUNK, remaining))
            if not data:
                break
            remaining -= len(data)
            yield data


@login_required
def serve_media(request, path: str):
    target = _resolve(path)
    size = target.stat().st_size
    content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    header = request.headers.get("Range", "")
    match = RANGE_RE.match(header.strip()) if header else None
    if match and (match.group(1) or match.group(2)):
        first, last = match.group(1), match.group(2)
        if first:
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
        else:  # suffix range: the last N bytes
            start = max(size - int(last), 0)
            end = size - 1
        if start >= size or start > end:
            response = HttpResponse(status=416)
            response["Content-Range"] = f"bytes */{size}"
            return response
        length = end - start + 1
        response = StreamingHttpResponse(_iter_range(open(target, "rb"), start, length), status=206, content_type=content_type)
        response["Content-Length"] = str(length)
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    else:
        response = FileResponse(open(target, "rb"), content_type=content_type)
        response["Content-Length"] = str(size)
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, max-age=3600"
    return response
