"""Serve uploaded media to the people allowed to see them, with HTTP Range support so video
players can seek.

Who may read what (the role rules themselves live in annotation/permissions.py):
- ``assets/…`` (stored media): a member of a project — any role, since annotators work on its
  items' media — one of whose items uses the asset. Otherwise 404, as for a hidden project.
  One query per request: the asset (by its file name), the items using it and the user's
  projects (`projects_visible_to`) are joined in a single EXISTS.
- the shared upload area (IMPORT_MEDIA_ROOT when it lies inside MEDIA_ROOT, default
  ``MEDIA_ROOT/incoming``): researchers (or admins) of at least one project; 403 for others.
- anything else under MEDIA_ROOT (job exports, …): superusers only (404 for others).
Superusers read everything under MEDIA_ROOT.

Media are untrusted bytes (DESIGN, invariants). A stored asset is answered only as the image or
video type its import recorded, and only when that type is on SAFE_TYPES; anything else (the
upload area, exports, an asset of another type) is an attachment of type application/octet-stream.
Every answer carries ``X-Content-Type-Options: nosniff`` and ``Content-Security-Policy: sandbox;
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

import json
import mimetypes
import re
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.files.storage import default_storage
from django.db import connection
from django.http import FileResponse, Http404, HttpResponse, HttpResponseRedirect, StreamingHttpResponse

from config.storage import is_local, signed_url

# What a stored asset may be served as (inline). SVG is deliberately absent: it can carry script.
SAFE_TYPES = {
    "image": {"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/tiff"},
    "video": {"video/mp4", "video/webm", "video/quicktime", "video/x-matroska", "video/x-msvideo"},
}
SANDBOX_CSP = "sandbox; default-src 'none'"
RANGE_RE = re.compile(r"bytes=(\d*)-(\d*)$")
CHUNK = 64 * 1024
# annotation.media.asset_name: assets/<sha[:2]>/<sha256><ext>
ASSET_NAME_RE = re.compile(r"^assets/([0-9a-f]{2})/(\1[0-9a-f]{62})(\.[A-Za-z0-9]{1,10})?$")


def _resolve(path: str) -> tuple[Path, Path]:
    """(media root, the path asked for) — 404 when it leaves the root or is not a plain path."""
    if "\x00" in path or len(path) > 1024:
        raise Http404("No such media file.")
    root = Path(settings.MEDIA_ROOT).resolve()
    target = (root / path).resolve()
    if root not in target.parents:
        raise Http404("No such media file.")
    return root, target


def _upload_root(root: Path) -> Path | None:
    from annotation.importing.runs import import_media_root

    upload = import_media_root().resolve()
    return upload if upload == root or root in upload.parents else None


def _media_fields() -> list[tuple[str, str]]:
    from annotation.protocols import MEDIA_FIELDS

    return sorted({(name, kind) for spec in MEDIA_FIELDS.values() for name, kind in spec.items()})


def _asset_media_sql() -> str:
    """SQL true when item `i` uses asset `a` in any media field of any protocol."""
    if connection.vendor == "postgresql":
        return "(" + " OR ".join(
            f"i.media @> jsonb_build_object('{name}', jsonb_build_array(a.sha256))"
            if kind == "images"
            else f"i.media @> jsonb_build_object('{name}', a.sha256)"
            for name, kind in _media_fields()
        ) + ")"
    return "EXISTS (SELECT 1 FROM json_tree(i.media) t WHERE t.atom = a.sha256)"  # SQLite (demo)


def readable_asset(user, relpath: str) -> tuple[str, str] | None:
    """(kind, recorded mime) of the asset stored at `relpath` when some project the user belongs to
    has an item using it; None otherwise. One statement (asset_check_sql)."""
    sql, params = asset_check_sql(user, relpath)
    with connection.cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
    return (row[0], row[1]) if row else None


def user_may_read_asset(user, relpath: str) -> bool:
    """Whether some project the user belongs to has an item using the asset stored at `relpath`."""
    return readable_asset(user, relpath) is not None


def asset_check_sql(user, relpath: str) -> tuple[str, list]:
    """The one statement behind readable_asset (served by annotation_item_media_gin): the asset's
    kind and mime, as one row when the user may read it, no row otherwise."""
    from annotation.models import Item, MediaAsset
    from annotation.permissions import projects_visible_to

    visible_sql, visible_params = projects_visible_to(user).order_by().values("pk").query.sql_with_params()
    where, params = "a.file = %s", [relpath]
    match = ASSET_NAME_RE.match(relpath)
    sha256 = match.group(2) if match else None
    if sha256:  # the usual name: look the asset up by its unique sha256 index
        where += " AND a.sha256 = %s"
        params.append(sha256)
    asset_sql = f"SELECT a.kind, a.mime FROM {MediaAsset._meta.db_table} a WHERE {where}"
    if sha256 and connection.vendor == "postgresql":
        # One EXISTS per media field, each a containment test against a constant: the GIN index
        # annotation_item_media_gin answers each with an index scan, however many items the
        # user's projects hold (an OR of them inside one subquery is planned as a full scan).
        tests = [{name: [sha256] if kind == "images" else sha256} for name, kind in _media_fields()]
        uses = " OR ".join(
            f"EXISTS (SELECT 1 FROM {Item._meta.db_table} i WHERE i.media @> %s::jsonb AND i.project_id IN ({visible_sql}))"
            for _ in tests
        )
        uses_params = [p for test in tests for p in (json.dumps(test), *visible_params)]
        return f"{asset_sql} AND ({uses})", [*params, *uses_params]
    sql = (
        f"{asset_sql} AND EXISTS ("
        f"SELECT 1 FROM {Item._meta.db_table} i WHERE i.project_id IN ({visible_sql}) AND {_asset_media_sql()})"
    )
    return sql, [*params, *visible_params]


def _asset_row(relpath: str) -> tuple[str, str] | None:
    from annotation.models import MediaAsset

    return MediaAsset.objects.filter(file=relpath).values_list("kind", "mime").first()


def _check_access(user, root: Path, target: Path) -> tuple[str, str] | None:
    """Refuse (404 / 403) unless the user may read the file; returns the asset's (kind, mime)
    when it is a stored asset, None for anything else."""
    from annotation.permissions import is_researcher_anywhere

    relpath = target.relative_to(root).as_posix()
    if user.is_superuser:
        return _asset_row(relpath) if relpath.startswith("assets/") else None
    upload = _upload_root(root)
    if upload is not None and (target.parent == upload or upload in target.parents):
        if not is_researcher_anywhere(user):
            raise PermissionDenied("The upload area is for researchers.")
        return None
    if relpath.startswith("assets/"):
        asset = readable_asset(user, relpath)
        if asset is not None:
            return asset
    raise Http404("No such media file.")


def served_type(asset: tuple[str, str] | None, target: Path) -> str | None:
    """The type a file may be served inline as: a stored asset's recorded image/video type when it
    is on SAFE_TYPES (for rows recorded without one, the type of its extension when that is safe
    for its kind); None means "attachment only"."""
    if asset is None:
        return None
    kind, mime = asset
    allowed = SAFE_TYPES.get(kind, set())
    if mime:
        return mime if mime in allowed else None
    guessed = mimetypes.guess_type(target.name)[0]
    return guessed if guessed in allowed else None


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
    asset = _check_access(request.user, root, target)  # before looking at the file: a refusal says nothing about it
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
        response = StreamingHttpResponse(_iter_range(open(target, "rb"), start, length), status=206, content_type=content_type)
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
    url = signed_url(relpath, content_type=inline_type or "application/octet-stream", disposition=disposition,
                     expires=seconds, cache_control="private, max-age=3600")
    response = HttpResponseRedirect(url)
    # A browser may reuse the redirect while the URL it points to has at least half its life left.
    response["Cache-Control"] = f"private, max-age={seconds // 2}"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = SANDBOX_CSP
    return response
