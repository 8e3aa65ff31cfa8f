"""/media/<path>: uploaded media to the people allowed to see them (annotation/media/access.py
says who and as what type: a stored asset to the members of a project that owns it), with HTTP
Range support so video players can seek. Access is decided before the file is looked at, so
another project's file and a file that does not exist get the same 404.

Media are untrusted bytes (DESIGN, invariants). A stored asset is answered only as the image or
video type its import recorded, and only when that type is safe; anything else (the upload area,
exports, an asset of another type) is an attachment of type application/octet-stream. Every
answer carries ``X-Content-Type-Options: nosniff`` and ``Content-Security-Policy: sandbox;
default-src 'none'``, so a file opened directly can never run script as the viewer, whatever its
name or content.

With the default file-system storage this view streams the file itself, with Range (the demo,
the tests and a single-machine deployment); it reads settings.MEDIA_ROOT on every request.
With object storage (MEDIA_STORAGE: S3, MinIO) the same checks run first, then the answer is a
302 to a presigned GET of the object valid MEDIA_SIGNED_URL_SECONDS (config/storage.py), rather
than streaming it through Django: the bucket serves Range requests itself and video bytes never
tie up a web worker. The URL fixes the response's Content-Type (the recorded safe type, else
application/octet-stream) and Content-Disposition (inline, else an attachment) as above. The
bucket cannot add nosniff or the sandbox CSP, which is why it must be on another origin than the
app (its own host or port, as MinIO and S3 are): a file there can never run script as the viewer.
A refusal never redirects, and says nothing about whether the object exists.
"""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404, HttpResponse, HttpResponseRedirect, StreamingHttpResponse

from config.storage import is_local, signed_url

from ..media.access import media_check_access, served_type

SANDBOX_CSP = "sandbox; default-src 'none'"
RANGE_RE = re.compile(r"bytes=(\d*)-(\d*)$")
CHUNK = 64 * 1024


def _resolve(path: str) -> tuple[Path, Path]:
    """(media root, the path asked for) — 404 when it leaves the root or is not a plain path."""
    if "\x00" in path or len(path) > 1024:
        raise Http404("No such media file.")
    root = Path(settings.MEDIA_ROOT).resolve()
    target = (root / path).resolve()
    if root not in target.parents:
        raise Http404("No such media file.")
    return root, target


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
    root, target = _resolve(path)
    # Before looking at the file: a refusal says nothing about it.
    asset = media_check_access(request.user, root, target)
    if not is_local(default_storage):
        return _redirect_to_bucket(target.relative_to(root).as_posix(), served_type(asset, target))
    if not target.is_file():
        raise Http404("No such media file.")
    size = target.stat().st_size
    inline_type = served_type(asset, target)
    content_type = inline_type or "application/octet-stream"
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
        response = StreamingHttpResponse(
            _iter_range(open(target, "rb"), start, length), status=206, content_type=content_type
        )
        response["Content-Length"] = str(length)
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    else:
        response = FileResponse(open(target, "rb"), content_type=content_type)
        response["Content-Length"] = str(size)
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = SANDBOX_CSP
    if inline_type is None:
        response["Content-Disposition"] = 'attachment; filename="media.bin"'
    return response


def _redirect_to_bucket(relpath: str, inline_type: str | None) -> HttpResponse:
    """302 to a presigned GET of the stored object (see the module docstring)."""
    if not default_storage.exists(relpath):
        raise Http404("No such media file.")
    seconds = settings.MEDIA_SIGNED_URL_SECONDS
    if inline_type:
        disposition = f'inline; filename="{Path(relpath).name}"'  # an asset's name: <sha256><ext>
    else:
        disposition = 'attachment; filename="media.bin"'
    url = signed_url(
        relpath,
        content_type=inline_type or "application/octet-stream",
        disposition=disposition,
        expires=seconds,
        cache_control="private, max-age=3600",
    )
    response = HttpResponseRedirect(url)
    # A browser may reuse the redirect while the URL it points to has at least half its life left.
    response["Cache-Control"] = f"private, max-age={seconds // 2}"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = SANDBOX_CSP
    return response
