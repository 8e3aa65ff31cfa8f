"""The media storage as one host sees it: local files (the default FileSystemStorage under
MEDIA_ROOT) or objects in an S3-compatible bucket (MEDIA_STORAGE=storages.backends.s3.S3Storage)
that no two hosts need to share a folder for.

- `is_local` says which: a storage whose files have a path on this host.
- `local_copy` gives a stored file as a path on this host: the file itself when the storage is
  local, else a copy under CACHE_ROOT/storage/<name>, downloaded once (into a private temporary
  file renamed into place, so concurrent workers never read half a file) and checked against the
  SHA-256 in its content-addressed name. Workers read media through it (inference's MediaPreparer).
- `signed_url` is the short-lived presigned GET that /media/ redirects to
  (annotation/views/media.py), with the response headers the bucket must answer with (type,
  disposition, cache).
- `media_origin` is the origin those URLs point at: pages must allow it for images and video in
  their Content-Security-Policy (config/csp.py), since browsers check a redirect's target too.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage, storages

DOWNLOAD_CHUNK = 1024 * 1024
# annotation/media/assets.py, asset_name: the stem of a stored asset is its content's SHA-256.
SHA_STEM_RE = re.compile(r"^[0-9a-f]{64}$")


class StoredFileMismatch(OSError):
    """A downloaded file's bytes do not hash to the SHA-256 its name carries."""


def is_local(storage=None) -> bool:
    """Whether the storage's files are files on this host (FileSystemStorage and its kind)."""
    storage = storage or default_storage
    try:
        storage.path("probe")
    except NotImplementedError:
        return False
    return True


def local_copy(name: str, *, storage=None) -> Path:
    """Path on this host of the stored file `name` (see the module docstring)."""
    storage = storage or default_storage
    if is_local(storage):
        return Path(storage.path(name))
    if not name or name.startswith("/") or ".." in Path(name).parts or "\x00" in name:
        raise ValueError(f"not a stored file name: {name!r}")
    target = Path(settings.CACHE_ROOT) / "storage" / name
    if target.is_file():
        _touch(target)  # its last use, for the cache's pruning (inference/services/cache.py)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            digest = _download(storage, name, fh)
        expected = Path(name).stem
        if SHA_STEM_RE.match(expected) and digest != expected:
            raise StoredFileMismatch(f"stored file {name} does not hash to its name (got {digest})")
        os.replace(tmp, target)  # atomic: a concurrent download of the same name wins or loses whole
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:  # pruned meanwhile: the caller's open says so
        pass


def is_missing(exc: BaseException) -> bool:
    """Whether a storage error says the file is not there (a local FileNotFoundError, or the
    bucket's 404 as botocore's ClientError), as opposed to the storage being unreachable."""
    if isinstance(exc, FileNotFoundError):
        return True
    code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
    return code in ("404", "NoSuchKey", "NotFound")


class _HashingWriter:
    def __init__(self, fh):
        self.fh, self.sha = fh, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        return self.fh.write(data)


def _download(storage, name: str, fh) -> str:
    """Copy the stored file into `fh`; its SHA-256 (hex)."""
    writer = _HashingWriter(fh)
    bucket = getattr(storage, "bucket", None)
    if bucket is not None and hasattr(storage, "_normalize_name"):
        # S3: stream the object straight into the file. (storage.open would first buffer the
        # whole object in a SpooledTemporaryFile, in memory by default: a video twice over.)
        # The writer cannot seek, so boto3 writes the parts in order (as the hash needs).
        from storages.utils import clean_name

        bucket.download_fileobj(storage._normalize_name(clean_name(name)), writer)
    else:
        with storage.open(name, "rb") as src:
            shutil.copyfileobj(src, writer, DOWNLOAD_CHUNK)
    return writer.sha.hexdigest()


@lru_cache(maxsize=4)
def _signing_storage(backend: str, options_key: str, public_endpoint: str):
    """The storage that signs URLs for browsers: the default one, or the same bucket addressed
    through MEDIA_STORAGE_PUBLIC_ENDPOINT when the browser reaches it by another name than the
    servers do (compose: http://minio:9000 inside, http://localhost:9000 outside)."""
    import json

    options = {**json.loads(options_key), "endpoint_url": public_endpoint}
    return storages.create_storage({"BACKEND": backend, "OPTIONS": options})


def signed_url(name: str, *, content_type: str, disposition: str, expires: int, cache_control: str) -> str:
    """A presigned GET of the stored object `name`, valid for `expires` seconds, whose response
    carries exactly these Content-Type, Content-Disposition and Cache-Control headers."""
    import json

    storage = default_storage
    public = getattr(settings, "MEDIA_STORAGE_PUBLIC_ENDPOINT", "") or ""
    if public:
        config = settings.STORAGES["default"]
        storage = _signing_storage(config["BACKEND"], json.dumps(config.get("OPTIONS") or {}, sort_keys=True), public)
    return storage.url(
        name,
        parameters={
            "ResponseContentType": content_type,
            "ResponseContentDisposition": disposition,
            "ResponseCacheControl": cache_control,
        },
        expire=expires,
    )


def media_origin() -> str | None:
    """The origin (scheme://host[:port]) of the presigned URLs browsers are redirected to, or None
    when media are served from the app's own origin (local storage). Read from a URL signed the way
    /media/ signs them (no request is made: signing is local), so it follows the endpoint, the
    public endpoint, a custom domain or virtual-host addressing, whichever the options set."""
    if is_local():
        return None
    config = settings.STORAGES["default"]
    import json

    return _media_origin(
        config["BACKEND"],
        json.dumps(config.get("OPTIONS") or {}, sort_keys=True),
        getattr(settings, "MEDIA_STORAGE_PUBLIC_ENDPOINT", "") or "",
    )


@lru_cache(maxsize=4)
def _media_origin(backend: str, options_key: str, public_endpoint: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(
        signed_url(
            "assets/00/origin-probe",
            content_type="application/octet-stream",
            disposition="attachment",
            expires=60,
            cache_control="no-store",
        )
    )
    return f"{parts.scheme}://{parts.netloc}"
