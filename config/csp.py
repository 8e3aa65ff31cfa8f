"""Content-Security-Policy on every HTML page StateLab serves.

Our pages run no inline script: their code is ES modules under static/js/ and their data comes
in data-* attributes or `json_script` islands (type application/json, which is not script).
Their styles are static CSS files; the modules set styles through the CSSOM (`el.style.x = …`),
which CSP does not govern. So one strict policy fits them all, the Django admin included.

With object storage, /media/ redirects to a presigned URL on the bucket's origin, and browsers
check a redirect's target against img-src and media-src: pages then allow that one origin for
images and video (config/storage.py: media_origin), nothing else.

A response that already carries a policy keeps it: /media/ answers with its own sandbox policy
(annotation/views/media.py). With DEBUG on, error pages keep none: Django's technical 404 and 500
pages are built with inline style and script (production renders plain templates).

Exceptions, each scoped to its paths, for pages that are not ours:
- DRF's browsable API (HTML answers under /api/) has a Pygments <style> block and style
  attributes: its styles may be inline; its scripts are static files, as ours are.
- The API docs are drf-spectacular's templates. Swagger UI (/api/docs/) starts from an inline
  script built from SPECTACULAR_SETTINGS, with an inline <style>. Their policy allows exactly the
  inline <script> and <style> blocks of the page served, by hash (computed here: a hash lets that
  script run and nothing added to the page later, unlike 'unsafe-inline'). ReDoc (/api/redoc/)
  also writes its styles at run time (styled-components), runs its search in a worker made from
  a blob: URL, links Google Fonts and shows Redocly's logo from cdn.redoc.ly: those are allowed
  there only. The docs pages hold no user data: the schema comes as JSON.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re

from django.conf import settings

HEADER = "Content-Security-Policy"
log = logging.getLogger(__name__)

PAGE_POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:", "blob:"],
    "media-src": ["'self'", "blob:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
}

API_PREFIX = "/api/"
DOCS_PATHS = ("/api/docs/", "/api/redoc/")
INLINE_BLOCK_RE = re.compile(rb"<(script|style)(\s[^>]*)?>(.*?)</\1\s*>", re.S | re.I)


def render(policy: dict[str, list[str]]) -> str:
    return "; ".join(" ".join([name, *sources]) for name, sources in policy.items())


def _sha256(body: bytes) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(body).digest()).decode() + "'"


def docs_policy(path: str, content: bytes) -> str:
    """The page policy plus, by hash, the inline <script> and <style> blocks of this docs page."""
    scripts, styles = [], []
    for tag, attrs, body in INLINE_BLOCK_RE.findall(content):
        if tag.lower() == b"script" and b"src=" not in (attrs or b"").lower():
            scripts.append(_sha256(body))
        elif tag.lower() == b"style":
            styles.append(_sha256(body))
    policy = {**PAGE_POLICY, "script-src": ["'self'", *scripts], "style-src": ["'self'", *styles]}
    if path.startswith("/api/redoc/"):
        # styled-components writes <style> elements at run time: their text cannot be known here
        # (and a hash in the list would make browsers ignore 'unsafe-inline'). The template loads
        # its fonts from Google and the page shows Redocly's logo from their CDN.
        policy["style-src"] = ["'self'", "'unsafe-inline'", "https://fonts.googleapis.com"]
        policy["font-src"] = ["'self'", "https://fonts.gstatic.com"]
        policy["img-src"] = [*PAGE_POLICY["img-src"], "https://cdn.redoc.ly"]
        policy["worker-src"] = ["'self'", "blob:"]
    return render(policy)


PAGE_HEADER = render(PAGE_POLICY)


def page_header() -> str:
    """PAGE_HEADER, plus the bucket's origin for images and video when media are redirected there.
    A storage that cannot sign (no credentials, a bad option) must not take every page down with
    it: the pages keep the strict policy, and the error is logged (/media/ reports it too)."""
    from config.storage import media_origin

    try:
        origin = media_origin()
    except Exception:  # noqa: BLE001 (the storage backend's own errors: botocore, ImproperlyConfigured)
        log.error("media storage cannot sign URLs: pages allow no media origin", exc_info=True)
        return PAGE_HEADER
    if origin is None:
        return PAGE_HEADER
    return render(
        {**PAGE_POLICY, "img-src": [*PAGE_POLICY["img-src"], origin], "media-src": [*PAGE_POLICY["media-src"], origin]}
    )


BROWSABLE_API_HEADER = render({**PAGE_POLICY, "style-src": ["'self'", "'unsafe-inline'"]})


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if HEADER in response or not response.get("Content-Type", "").startswith("text/html"):
            return response
        if settings.DEBUG and response.status_code >= 400:
            return response
        if request.path.startswith(DOCS_PATHS) and not response.streaming:
            response[HEADER] = docs_policy(request.path, response.content)
        elif request.path.startswith(API_PREFIX):
            response[HEADER] = BROWSABLE_API_HEADER
        else:
            response[HEADER] = page_header()
        return response
