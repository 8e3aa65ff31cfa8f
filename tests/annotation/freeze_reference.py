"""The freeze and the resolvers' option draws as they were before they were made faster, kept once
as the reference that tests/annotation/test_freeze_set_based.py and test_freeze_resolvers.py compare
the current code with, and the baseline bench/bench_freeze.py (through bench/freeze_baseline.py)
measures against: the item-by-item freeze (ORM reads in chunks, the media map and the
one-file-per-path check in a Python dict, one COPY per 2,000 rows) and ChangeIt's candidates with
the labels of the other objects gathered and sorted again for every item. Not a test module."""

from __future__ import annotations

import hashlib
import json

from django.db import IntegrityError, connection, transaction

from annotation.audit.record import audit_record
from annotation.importing.copy_spool import copy_text
from annotation.interchange.checksum import LINES_AND_MEDIA
from annotation.interchange.frozen import line_media, project_snapshot
from annotation.models import AuditAction, Item, ItemStatus, MediaAsset, Release, ReleaseItem
from annotation.protocols import MEDIA_FIELDS, vocabulary
from annotation.releases import VERSION_RE, ReleaseRefused, export_line
from protocols.changeit import N_CANDIDATES

CHUNK = 2000


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class _Writer:
    def __init__(self, release):
        self.release, self.position, self.buffer = release, 0, []

    def add(self, item_pk, text: bytes, media: bytes) -> None:
        line, files = copy_text(text.decode("utf-8")), copy_text(media.decode("utf-8"))
        self.buffer.append(f"{self.release.pk}\t{item_pk}\t{self.position}\t{line}\t{files}\n")
        self.position += 1
        if len(self.buffer) >= 2000:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        columns = "release_id, item_id, position, payload, media"
        with connection.cursor() as cur:
            with cur.cursor.copy(f'COPY "{ReleaseItem._meta.db_table}" ({columns}) FROM STDIN') as copy:
                copy.write("".join(self.buffer).encode("utf-8"))
        self.buffer = []


def _reference_check_stored(shas: set[str]) -> None:
    ordered = sorted(shas)
    stored: set[str] = set()
    for start in range(0, len(ordered), CHUNK):  # within PostgreSQL's 65,535 parameters at 100k files
        chunk = ordered[start : start + CHUNK]
        stored.update(MediaAsset.objects.filter(sha256__in=chunk).values_list("sha256", flat=True))
    missing = sorted(shas - stored)
    if missing:
        raise ReleaseRefused(f"media: {len(missing)} media file(s) have no stored copy (sha256 {missing[0]}, ...)")


@transaction.atomic
def reference_freeze(*, project, version: str, split: str = "test", user=None) -> Release:
    if not VERSION_RE.match(version or ""):
        raise ReleaseRefused("version: use letters, digits, '.', '_' or '-' (e.g. v1), at most 50 characters")
    if Release.objects.filter(project=project, version=version).exists():
        raise ReleaseRefused(f"version: release {version} exists already; releases are immutable, pick a new version")
    items = Item.objects.filter(project=project, split=split, status=ItemStatus.VERIFIED).order_by("external_id")
    if not items.exists():
        raise ReleaseRefused(f"split: no verified items in split {split!r}")
    release_vocabulary = vocabulary(project.protocol, items.values_list("payload", flat=True).iterator(chunk_size=2000))
    try:
        with transaction.atomic():
            release = Release.objects.create(
                project=project,
                version=version,
                split=split,
                created_by=user,
                option_seed=project.option_seed,
                checksum="",
                checksum_method=LINES_AND_MEDIA,
                frozen_project=project_snapshot(project),
            )
    except IntegrityError as exc:
        raise ReleaseRefused(f"version: release {version} exists already") from exc
    digest = hashlib.sha256(
        _canonical({"protocol": project.protocol, "split": split, "option_seed": project.option_seed}) + b"\n"
    )
    media_fields = MEDIA_FIELDS[project.protocol]
    shipped: dict[str, tuple[str, str]] = {}
    writer = _Writer(release)
    rows = items.values_list("id", "external_id", "payload", "tags", "media").iterator(chunk_size=2000)
    try:
        for pk, external_id, payload, tags, item_media in rows:
            line = export_line(
                protocol=project.protocol,
                external_id=external_id,
                payload=payload,
                split=split,
                tags=tags,
                seed=project.option_seed,
                vocabulary=release_vocabulary,
            )
            media: dict[str, str] = {}
            for path, sha in line_media(line, item_media, media_fields):
                first = shipped.setdefault(path, (sha, external_id))
                if first[0] != sha:
                    raise ReleaseRefused(
                        f"media: items {first[1]} and {external_id} name {path} for two different files; "
                        "a release ships one file per path"
                    )
                media.setdefault(path, sha)
            text = _canonical(line)
            digest.update(text + b"\n")
            writer.add(pk, text, _canonical(media))
    finally:
        rows.close()
    writer.flush()
    _reference_check_stored({sha for sha, _ in shipped.values()})
    release.item_count = writer.position
    digest.update(_canonical({"media": {path: sha for path, (sha, _) in shipped.items()}}) + b"\n")
    release.checksum = digest.hexdigest()
    release.save(update_fields=["item_count", "checksum"])
    audit_record(
        action=AuditAction.FREEZE,
        actor=user,
        project=project,
        obj=release,
        details={"split": split, "items": release.item_count, "checksum": release.checksum},
    )
    return release


def reference_candidates(payload, strategy, vocab, rng) -> list[str]:
    truth = payload["state"]
    obj = payload["object"]
    picked: list[str] = [truth]
    if strategy == "standard":
        first = [s for s in vocab.get(obj, []) if s != truth]
    else:
        first = [s for s in payload.get("distractors", []) if s != truth]
    for label in first:
        if len(picked) >= N_CANDIDATES:
            break
        if label not in picked:
            picked.append(label)
    others = sorted({s for o, states in vocab.items() if o != obj for s in states} - set(picked))
    rng.shuffle(others)
    for label in others:
        if len(picked) >= N_CANDIDATES:
            break
        picked.append(label)
    rng.shuffle(picked)
    return picked
