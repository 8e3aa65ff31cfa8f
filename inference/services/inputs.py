"""What a job asks and how it reads the answer: each item's input (its payload as the job sees
it, resolved queries, media references and known video metadata), the protocol's queries for
it, and the parsing of a reply with the same protocol (also used when a job is re-scored).

A job on a release reads the media the release froze (ReleaseItem.media: each relative path its
line names -> the SHA-256 recorded at the freeze), never the live item's, so a job on v1 sees
exactly v1's bytes even after an item was edited; a job without a release reads the live items.

Media references are local paths when the media storage is local, else the stored names, which
`media_file` (the MediaPreparer's fetch) copies into this host's cache only when a query reads
them: a worker on another host needs no shared folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage

from annotation.models import Item, MediaAsset, Project, ReleaseItem
from annotation.project_setup import project_setting
from annotation.protocols import MEDIA_FIELDS, resolve_queries
from config.storage import StoredFileMismatch, is_local, is_missing, local_copy
from protocols import registry
from protocols.kit.answers import parse_answer
from protocols.kit.prompting import ItemInput, PreparedQuery

from ..media import MediaError, VideoInfo
from ..models import InferenceJob, JobMode
from ..prompting import MediaPreparer, get_protocol


def _option_seed(job: InferenceJob) -> int:
    return job.release.option_seed if job.release_id else job.project.option_seed


def _media_assets(hashes: list[dict[str, Any]]) -> dict[str, MediaAsset]:
    shas: set[str] = set()
    for media in hashes:
        for value in media.values():
            shas.update(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str) and v)
    return {a.sha256: a for a in MediaAsset.objects.filter(sha256__in=shas)}


def frozen_hashes(line: dict[str, Any], frozen: dict[str, str], fields) -> dict[str, Any]:
    """The media hashes of one release line, field by field as an item holds them (one SHA-256, or a
    list for a list field), from the path -> SHA-256 pairs its release froze: a path the freeze
    recorded no file for has no hash (its queries then find no media, as a live item's would)."""
    frozen = frozen if isinstance(frozen, dict) else {}
    out: dict[str, Any] = {}
    for name in fields:
        paths = line.get(name)
        if isinstance(paths, list):
            out[name] = [frozen.get(p) if isinstance(p, str) else None for p in paths]
        elif isinstance(paths, str) and paths in frozen:
            out[name] = frozen[paths]
    return out


def _video_info(media: dict[str, Any], field_name: str, assets: dict[str, MediaAsset]) -> VideoInfo | None:
    sha = media.get(field_name)
    asset = assets.get(sha) if isinstance(sha, str) else None
    if asset is None or not (asset.width and asset.height and asset.frame_count):
        return None
    return VideoInfo(asset.width, asset.height, asset.frame_count, asset.duration)


def _local_path(media: dict[str, Any], field_name: str, lookup: dict[str, str], payload: dict) -> Any:
    sha = media.get(field_name)
    rel = payload.get(field_name)
    if isinstance(sha, list) or isinstance(rel, list):
        shas = sha if isinstance(sha, list) else [None] * len(rel or [])
        rels = rel if isinstance(rel, list) else [None] * len(shas)
        return [_one_path(s, r, lookup) for s, r in zip(shas, rels)]
    return _one_path(sha, rel, lookup)


def _one_path(sha: str | None, rel: str | None, lookup: dict[str, str]) -> str | None:
    if sha and sha in lookup:
        return lookup[sha]
    if rel and is_local(default_storage):
        path = Path(settings.MEDIA_ROOT) / rel
        return str(path) if path.exists() else None
    return None


def item_inputs(job: InferenceJob, item_ids: list[int]) -> list[ItemInput]:
    items = {i.pk: i for i in Item.objects.filter(pk__in=item_ids)}
    fields = MEDIA_FIELDS[job.protocol]
    if job.release_id:
        rows = ReleaseItem.objects.filter(release_id=job.release_id, item_id__in=item_ids).values_list(
            "item_id", "payload", "media"
        )
        payloads, hashes = {}, {}
        for item_id, payload, frozen in rows:
            payloads[item_id] = payload
            hashes[item_id] = frozen_hashes(payload, frozen, fields)
    else:
        payloads = {pk: item.payload for pk, item in items.items()}
        hashes = {pk: dict(item.media or {}) for pk, item in items.items()}
    assets = _media_assets(list(hashes.values()))
    local = is_local(default_storage)
    lookup = {sha: default_storage.path(asset.file.name) if local else asset.file.name for sha, asset in assets.items()}
    seed = _option_seed(job)
    vocabulary_param = registry.get(job.protocol).vocabulary_param
    vocabulary = job.params.get(vocabulary_param) if vocabulary_param else None
    out = []
    for item_id in item_ids:
        if item_id not in items or item_id not in payloads:
            continue
        item, payload, media = items[item_id], payloads[item_id], hashes[item_id]
        stored = payload.get("resolved") if job.release_id else None
        if job.mode == JobMode.SUGGEST:
            resolved = _resolve_unlabeled(job.protocol, item.external_id, payload, seed)
        elif isinstance(stored, dict) and stored:
            # A release froze the option orders (and candidate lists) its scores use: show exactly those.
            resolved = stored
        else:
            resolved = resolve_queries(job.protocol, item.external_id, payload, seed=seed, vocabulary=vocabulary)
        out.append(
            ItemInput(
                item_pk=item.pk,
                external_id=item.external_id,
                payload=payload,
                media_paths={f: _local_path(media, f, lookup, payload) for f in fields},
                media_hashes=media,
                resolved=resolved,
                media_info={
                    f: info for f, kind in fields.items() if kind == "video" and (info := _video_info(media, f, assets))
                },
                project_settings=dict(job.project.settings or {}),
            )
        )
    return out


def media_file(ref: str) -> str:
    """The local path of a media reference from item_inputs: a path as is, a stored name copied
    from the storage into CACHE_ROOT (once per host; config.storage.local_copy)."""
    if os.path.isabs(ref):
        return ref
    try:
        return str(local_copy(ref))
    except StoredFileMismatch as exc:
        raise MediaError(str(exc)) from None
    except Exception as exc:  # a missing file fails its queries; an unreachable storage, the chunk (retried)
        if is_missing(exc):
            raise MediaError(f"media file {Path(ref).name} is missing from the media storage") from None
        raise


def _resolve_unlabeled(protocol: str, external_id: str, payload: dict, seed: int) -> dict[str, dict]:
    """Queries of an item that has no answer yet (suggestion mode), as the protocol's prompts say
    (``suggestion_queries``); by default its one question, unanswered."""
    unlabeled = getattr(get_protocol(protocol), "suggestion_queries", None)
    if unlabeled is not None:
        return unlabeled(payload)
    return {"qa": {"options": list(payload.get("options") or []), "answer": None, "format": payload.get("format")}}


def _judge_rubric(project: Project) -> Any:
    """The rubric human raters of this project see (its own wording over the platform default),
    so judge and humans rate against the same text."""
    custom = project_setting(project.settings, "rubric", None, project=project.slug)
    if isinstance(custom, str):
        return custom
    from annotation.selectors import rubric_for

    return rubric_for(project=project)


def build_queries(job: InferenceJob, item: ItemInput, media: MediaPreparer) -> list[PreparedQuery]:
    module = get_protocol(job.protocol)
    params = dict(job.params)
    if "rubric" in registry.get(job.protocol).settings_keys and "rubric" not in params:
        params["rubric"] = _judge_rubric(job.project)
    try:
        if job.mode == JobMode.SUGGEST and hasattr(module, "build_suggestion"):
            return module.build_suggestion(item, media=media, params=params)
        prepared = module.build(item, media=media, params=params)
    except MediaError as exc:
        return [
            PreparedQuery(key=k, query=None, options=v.get("options", []), error=str(exc))
            for k, v in item.resolved.items()
        ]
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"cannot build the prompt: {type(exc).__name__}: {exc}"
        return [
            PreparedQuery(key=k, query=None, options=v.get("options", []), error=msg) for k, v in item.resolved.items()
        ]
    for query in prepared:  # what the parser needs of the resolved query besides its options
        query.unshown = list((item.resolved.get(query.key) or {}).get("unshown") or [])
    return prepared


def parse_reply(job: InferenceJob, prepared: PreparedQuery, text: str) -> Any:
    module = get_protocol(job.protocol)
    if job.mode == JobMode.SUGGEST and hasattr(module, "parse_suggestion"):
        return module.parse_suggestion(text)
    return parse_answer(job.protocol, prepared.key, text, prepared.options, fmt=prepared.fmt, unshown=prepared.unshown)


def unreadable_json_error(query_key: str, repairs: int, repair_error: str | None = None) -> str:
    """Why a JSON-schema reply that came back has no answer: it stayed unreadable through its
    repairs (the protocol's spec page: repaired or asked again, else missing). Stored with status ok and a null
    answer, so it counts as a parse failure and is scored as missing, as an unreadable option
    reply is; the reason says so. Written by the chunk that stores the reply (chunks.py) and by a
    re-score that finds the stored reply unreadable (jobs.job_rescore)."""
    reason = f"{query_key} reply not valid JSON after {repairs} repair{'s' if repairs != 1 else ''}"
    return f"{reason}; the last repair request failed: {repair_error}" if repair_error else reason
