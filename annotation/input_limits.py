"""Bounded, validated request input, for every page and API: refused early, with a 4xx that says why.

- Uploads stream to disk (`CappedUploadHandler`, a TemporaryFileUploadHandler: nothing is held in
  memory) and are refused with 413 past ``STATELAB_MAX_UPLOAD_BYTES`` (default 2 GiB): a request
  whose Content-Length is above the cap is answered before a byte of its body is read; a
  multipart body without a Content-Length (chunked) is answered 411, since under WSGI Django
  would read nothing of it; and the handler counts what it receives, so a body that goes on past
  the cap stops there (an understated length, a server that passes chunked bodies through).
- Bodies that are not multipart (JSON, forms) are read into memory by DRF and Django, so they
  are capped at Django's own DATA_UPLOAD_MAX_MEMORY_SIZE, again by Content-Length, up front.
- NUL bytes are refused everywhere: in the path and the query string (400 here, for every page
  and API), in form fields, and in JSON bodies of the API (`NulFreeJSONParser`, DRF's default
  parser). PostgreSQL cannot store a NUL in text or jsonb, so one reaching a query was a 500.

The middleware parses a multipart body itself (before CSRF and the views), so its 413 is the
answer whoever reads the upload later: Django views and DRF both find it already parsed.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from django.http import HttpResponse, JsonResponse
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from protocols.fields import nul_field, unstorable_value

DEFAULT_MAX_UPLOAD_BYTES = 2 * 1024**3


class UploadTooLarge(RequestDataTooBig):
    """An upload went past STATELAB_MAX_UPLOAD_BYTES (a SuspiciousOperation: 400 wherever the
    middleware does not turn it into its 413)."""


def max_upload_bytes() -> int:
    return int(getattr(settings, "STATELAB_MAX_UPLOAD_BYTES", DEFAULT_MAX_UPLOAD_BYTES))


def too_large_message(size: int | None, cap: int) -> str:
    got = f"{size} bytes" if size is not None else "the upload"
    return (
        f"{got} is more than the upload limit of {cap} bytes ({cap / 1024**3:.2f} GiB, "
        "STATELAB_MAX_UPLOAD_BYTES); split the import or import it on the server with "
        "`manage.py import_items`"
    )


class CappedUploadHandler(TemporaryFileUploadHandler):
    """TemporaryFileUploadHandler (every file to a temporary file on disk, in chunks) that stops
    the upload once the request has brought more than the cap."""

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.cap = max_upload_bytes()
        self.received = 0
        if content_length and content_length > self.cap:
            raise UploadTooLarge(too_large_message(content_length, self.cap))
        return None  # go on: the parser calls the methods below

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > getattr(self, "cap", max_upload_bytes()):
            self.file.close()  # the temporary file is deleted on close
            raise UploadTooLarge(too_large_message(None, self.cap))
        return super().receive_data_chunk(raw_data, start)


def _refusal(request, status: int, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")


def _has_nul(request) -> str | None:
    """Where the request carries a NUL byte before its body is read (path, query string)."""
    if "\x00" in request.path_info and not request.path_info.startswith("/media/"):
        return "the path"  # /media/ answers any odd path 404 itself (annotation/views/media.py)
    query = request.META.get("QUERY_STRING", "")
    if "%00" in query or "\x00" in query:
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in v for v in values):
                return f"query parameter {name.replace(chr(0), '?')!r}"
        return "the query string"
    return None


class InputLimitsMiddleware:
    """The checks of this module's docstring that come before a view; placed after the
    authentication middleware and before any that reads the body (CSRF reads it in process_view)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where = _has_nul(request)
        if where:
            return _refusal(request, 400, f"{where} contains a NUL byte (%00), which is never valid input")
        refused = self._body_refusal(request)
        if refused is not None:
            return refused
        return self.get_response(request)

    def _body_refusal(self, request) -> HttpResponse | None:
        raw_length = request.META.get("CONTENT_LENGTH") or ""
        try:
            length = int(raw_length) if raw_length else None
        except ValueError:
            return _refusal(request, 400, f"Content-Length {raw_length[:40]!r} is not a number")
        multipart = request.content_type == "multipart/form-data"
        form = multipart or request.content_type == "application/x-www-form-urlencoded"
        cap = max_upload_bytes() if multipart else settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if length is not None and cap is not None and length > cap:
            if multipart:
                return _refusal(request, 413, too_large_message(length, cap))
            return _refusal(
                request,
                413,
                f"the request body of {length} bytes is more than the limit of {cap} "
                "bytes (DATA_UPLOAD_MAX_MEMORY_SIZE) for a body that is not an upload",
            )
        if not form or request.method not in ("POST", "PUT", "PATCH"):
            return None
        if multipart and length is None and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            return _refusal(request, 411, "an upload needs a Content-Length header (chunked uploads are not taken)")
        try:
            request.FILES  # parse now (a file streams to disk through CappedUploadHandler)
        except UploadTooLarge as exc:
            return _refusal(request, 413, str(exc))
        except RequestDataTooBig as exc:  # too many fields, or form fields above DATA_UPLOAD_MAX_MEMORY_SIZE
            return _refusal(request, 413, str(exc))
        except Exception:  # a malformed body: left for the view, which answers it as Django and DRF do
            return None
        for name, values in request.POST.lists():
            if "\x00" in name or any("\x00" in v for v in values):
                return _refusal(request, 400, f"form field {name.replace(chr(0), '?')!r} contains a NUL byte")
        for name, files in request.FILES.lists():
            if any("\x00" in (f.name or "") for f in files):
                return _refusal(request, 400, f"the name of the file in field {name!r} contains a NUL byte")
        return None


class NulFreeJSONParser(JSONParser):
    """DRF's JSON parser, refusing a body that holds a NUL byte in any string, a lone surrogate or
    a number out of a float's range (400 naming the field), or that nests too deep to read."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body nests too deep to read") from None
        where = nul_field(data)
        if where is not None:
            raise ParseError(
                f"JSON field {where.replace(chr(0), '?')} contains a NUL byte (\\u0000), which is never valid input"
            )
        found = unstorable_value(data)
        if found is not None:
            where, problem = found
            where = where.encode("utf-8", "replace").decode()
            raise ParseError(f"JSON field {where} holds {problem}")
        return data


__all__ = ["CappedUploadHandler", "InputLimitsMiddleware", "NulFreeJSONParser", "UploadTooLarge"]
