"""Who may read which file under MEDIA_ROOT, and as what type (served by annotation/views/media.py).

The role rules themselves live in annotation/permissions.py:
- ``assets/…`` (stored media): a member of a project — any role, since annotators work on its
  items' media — that owns the asset: one of the project's own imports stored those bytes
  (`ProjectAsset`, recorded by annotation/media/assets.py, assets_store). An item's media JSON is
  never asked: pointing an item at another project's hash gives nothing. Otherwise 404, the same
  answer as for a file that does not exist, so a refusal tells nothing about other projects' files.
  One statement per request (`asset_check_sql`): the asset (by its file name), its owners and the
  user's projects (`projects_visible_to`) are joined in one EXISTS test.
- the shared upload area (IMPORT_MEDIA_ROOT when it lies inside MEDIA_ROOT, default
  ``MEDIA_ROOT/incoming``): researchers (or admins) of at least one project; 403 for others.
- anything else under MEDIA_ROOT (job exports, …): superusers only (404 for others).
Superusers read everything under MEDIA_ROOT.

Media are untrusted bytes (DESIGN, invariants): a stored asset may be shown inline only as the
image or video type its import recorded, and only when that type is on SAFE_TYPES
(`served_type`); anything else is an attachment.
"""

from __future__ import annotations

import mimetypes
import re
from pathlib import Path

from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404

from ..importing.runs import import_media_root
from ..models import MediaAsset, ProjectAsset
from ..permissions import is_researcher_anywhere, projects_visible_to

# What a stored asset may be served as (inline). SVG is deliberately absent: it can carry script.
SAFE_TYPES = {
    "image": {"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/tiff"},
    "video": {"video/mp4", "video/webm", "video/quicktime", "video/x-matroska", "video/x-msvideo"},
}
# annotation/media/assets.py, asset_name: assets/<sha[:2]>/<sha256><ext>
ASSET_NAME_RE = re.compile(r"^assets/([0-9a-f]{2})/(\1[0-9a-f]{62})(\.[A-Za-z0-9]{1,10})?$")


def _upload_root(root: Path) -> Path | None:
    upload = import_media_root().resolve()
    return upload if upload == root or root in upload.parents else None


def readable_asset(user, relpath: str) -> tuple[str, str] | None:
    """(kind, recorded mime) of the asset stored at `relpath` when a project the user may see owns
    it; None otherwise. One statement (asset_check_sql)."""
    sql, params = asset_check_sql(user, relpath)
    with connection.cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
    return (row[0], row[1]) if row else None


def asset_check_sql(user, relpath: str) -> tuple[str, list]:
    """The one statement behind readable_asset: the asset's kind and mime, as one row when a
    project visible to the user owns it (the owners' unique (asset, project) index answers the
    EXISTS), no row otherwise."""
    visible_sql, visible_params = projects_visible_to(user).order_by().values("pk").query.sql_with_params()
    where, params = "a.file = %s", [relpath]
    match = ASSET_NAME_RE.match(relpath)
    if match:  # the usual name: look the asset up by its unique sha256 index
        where += " AND a.sha256 = %s"
        params.append(match.group(2))
    sql = (
        f"SELECT a.kind, a.mime FROM {MediaAsset._meta.db_table} a WHERE {where} AND EXISTS ("
        f"SELECT 1 FROM {ProjectAsset._meta.db_table} o WHERE o.asset_id = a.id AND o.project_id IN ({visible_sql}))"
    )
    return sql, [*params, *visible_params]


def _asset_row(relpath: str) -> tuple[str, str] | None:
    return MediaAsset.objects.filter(file=relpath).values_list("kind", "mime").first()


def media_check_access(user, root: Path, target: Path) -> tuple[str, str] | None:
    """Refuse (404 / 403) unless the user may read the file `target` under the media root `root`;
    returns the asset's (kind, mime) when it is a stored asset, None for anything else."""
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
