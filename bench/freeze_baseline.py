"""The baseline bench/bench_freeze.py measures against: the item-by-item freeze as it was before
the set-based one, and the resolvers' option orders drawn as they were before they were made
faster (the same orders, more work). Imported by bench_freeze.py; not part of the application."""

from __future__ import annotations

import json
import sys
import time

# --- the old freeze (the baseline), as it was before the set-based one -------------------------


def old_release_freeze(*, project, version: str, split: str = "test", user=None):
    """The item-by-item freeze, kept only to be measured against (same checks, same lines, same
    checksum; tests/annotation/test_freeze_set_based.py keeps its own copy as the reference)."""
    import hashlib

    from django.db import IntegrityError, connection, transaction

    from annotation.audit.record import audit_record
    from annotation.importing.copy_spool import copy_text
    from annotation.interchange.checksum import LINES_AND_MEDIA
    from annotation.interchange.frozen import line_media, project_snapshot
    from annotation.models import AuditAction, Item, ItemStatus, MediaAsset, Release, ReleaseItem
    from annotation.protocols import MEDIA_FIELDS, vocabulary
    from annotation.releases import VERSION_RE, ReleaseRefused, export_line

    chunk_size = 2000

    def canonical(obj) -> bytes:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def check_stored(shas: set[str]) -> None:
        stored: set[str] = set()
        ordered = sorted(shas)
        for start in range(0, len(ordered), chunk_size):
            chunk = ordered[start : start + chunk_size]
            stored.update(MediaAsset.objects.filter(sha256__in=chunk).values_list("sha256", flat=True))
        missing = sorted(shas - stored)
        if missing:
            raise ReleaseRefused(f"media: {len(missing)} media file(s) have no stored copy (sha256 {missing[0]}, ...)")

    class Writer:
        def __init__(self, release):
            self.release, self.position, self.buffer = release, 0, []

        def add(self, item_pk: int, text: bytes, media: bytes) -> None:
            line, files = copy_text(text.decode("utf-8")), copy_text(media.decode("utf-8"))
            self.buffer.append(f"{self.release.pk}\t{item_pk}\t{self.position}\t{line}\t{files}\n")
            self.position += 1
            if len(self.buffer) >= chunk_size:
                self.flush()

        def flush(self) -> None:
            if not self.buffer:
                return
            columns = "release_id, item_id, position, payload, media"
            with connection.cursor() as cur:
                with cur.cursor.copy(f'COPY "{ReleaseItem._meta.db_table}" ({columns}) FROM STDIN') as copy:
                    copy.write("".join(self.buffer).encode("utf-8"))
            self.buffer = []

    with transaction.atomic():
        if not VERSION_RE.match(version or ""):
            raise ReleaseRefused("version: use letters, digits, '.', '_' or '-' (e.g. v1), at most 50 characters")
        if Release.objects.filter(project=project, version=version).exists():
            raise ReleaseRefused(f"version: release {version} exists already")
        items = Item.objects.filter(project=project, split=split, status=ItemStatus.VERIFIED).order_by("external_id")
        if not items.exists():
            raise ReleaseRefused(f"split: no verified items in split {split!r}")
        release_vocabulary = vocabulary(
            project.protocol, items.values_list("payload", flat=True).iterator(chunk_size=chunk_size)
        )
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
        digest = hashlib.sha256()
        digest.update(
            canonical({"protocol": project.protocol, "split": split, "option_seed": project.option_seed}) + b"\n"
        )
        media_fields = MEDIA_FIELDS[project.protocol]
        shipped: dict[str, tuple[str, str]] = {}
        writer = Writer(release)
        rows = items.values_list("id", "external_id", "payload", "tags", "media").iterator(chunk_size=chunk_size)
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
                text = canonical(line)
                digest.update(text + b"\n")
                writer.add(pk, text, canonical(media))
        finally:
            rows.close()
        writer.flush()
        check_stored({sha for sha, _ in shipped.values()})
        release.item_count = writer.position
        digest.update(canonical({"media": {path: sha for path, (sha, _) in shipped.items()}}) + b"\n")
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


def use_old_resolvers() -> None:
    """The option orders drawn as before the resolvers were made faster (same orders, more work):
    the standard library's shuffle, and ChangeIt's labels of the other objects gathered and sorted
    again for every item (tests/annotation/test_freeze_resolvers.py keeps the same reference)."""
    import protocols.base as base
    import protocols.changeit as changeit

    def old_shuffle(x, rng) -> None:
        rng.shuffle(x)

    def old_candidates(payload, strategy, vocab, rng) -> list[str]:
        truth, obj = payload["state"], payload["object"]
        picked = [truth]
        source = vocab.get(obj, []) if strategy == "standard" else payload.get("distractors", [])
        for label in [s for s in source if s != truth]:
            if len(picked) >= changeit.N_CANDIDATES:
                break
            if label not in picked:
                picked.append(label)
        others = sorted({s for o, states in vocab.items() if o != obj for s in states} - set(picked))
        rng.shuffle(others)
        for label in others:
            if len(picked) >= changeit.N_CANDIDATES:
                break
            picked.append(label)
        rng.shuffle(picked)
        return picked

    base.shuffle = old_shuffle  # what base.shuffled (STATUS) calls
    changeit.candidates = old_candidates


def resolver_bench(objects: int, n: int = 20_000, rounds: int = 2) -> None:
    """ChangeIt's ``resolve_queries`` alone, as before and as now, alternated in this process (CPU
    seconds): N items over a vocabulary of `objects` objects with three states each (the bench's
    items have four objects; a release of the authors' data has tens)."""
    import protocols.base as base
    import protocols.changeit as changeit

    now = (base.shuffle, changeit.candidates)
    vocab = {f"object {o}": [f"state {o}.{k}" for k in range(3)] for o in range(objects)}
    names = list(vocab)
    items = []
    for i in range(n):
        obj = names[i % objects]
        state = vocab[obj][i % 3]
        items.append(
            (f"c{i:07d}", {"object": obj, "state": state, "distractors": [s for s in vocab[obj] if s != state]})
        )
    for k in range(rounds):
        seconds, out = {}, {}
        for path in ("old", "new"):
            if path == "old":
                use_old_resolvers()
            else:
                base.shuffle, changeit.candidates = now
            start = time.process_time()
            out[path] = [changeit.protocol.resolve_queries(i, p, seed=7, vocabulary=vocab) for i, p in items]
            seconds[path] = time.process_time() - start
        print(
            f"  {objects * 3} labels, {n:,} items, round {k + 1}: old {seconds['old']:.2f} s, "
            f"new {seconds['new']:.2f} s CPU, old/new **{seconds['old'] / seconds['new']:.2f}×**, "
            f"same orders {out['old'] == out['new']}",
            flush=True,
        )
        if out["old"] != out["new"]:
            sys.exit("the resolvers differ")
