"""python manage.py export_release <project> <version> [-o FILE] [--jsonl | --zip | --format F] [--actor USERNAME]

--format also takes the name of one of the protocol's authors' formats that write (docs/importing.md,
e.g. the paper's release file as published): the release is written back in that format, into the
folder -o DIR (or, with -o FILE.zip, a zip of it), from the release's frozen lines and media
(annotation/interchange/authors.py).

Each export is recorded in the audit trail (as a download from the releases page is), under
--actor when given, with source=cli.
"""

import os
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.interchange.authors import (
    AuthorsExportError,
    authors_export,
    authors_export_formats,
    authors_zip_stream,
)
from annotation.interchange.hf import HFFolderError, hf_export
from annotation.interchange.lmms_eval import LmmsExportError, lmms_export
from annotation.management.actor import add_actor_argument, command_actor, on_command_line
from annotation.models import Release
from annotation.releases import EXPORT_FORMATS, ReleaseRefused, release_export, release_export_record

# The project's own export formats; any other --format value names an authors' format.
OWN_FORMATS = ("json", "jsonl", "zip", "coco", "hf", "lmms-eval")


class Command(BaseCommand):
    help = (
        "Stream a release as JSON (default), JSONL (--jsonl: a header line, then one item per line) or a zip "
        "with items.jsonl, release.json and the media (--zip, or an -o name ending in .zip). Box projects also "
        "export as COCO object-detection JSON (--format coco; with -o FILE.zip, a zip with the images)."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("version")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")
        parser.add_argument(
            "--push-to-hub",
            metavar="REPO_ID",
            help="with --format hf: upload the folder to this Hugging Face dataset repository "
            "(private when it is created; needs huggingface_hub and HF_TOKEN)",
        )
        fmt = parser.add_mutually_exclusive_group()
        fmt.add_argument("--jsonl", action="store_true")
        fmt.add_argument("--zip", action="store_true")
        fmt.add_argument(
            "--format",
            dest="format",
            metavar="FORMAT",
            help="json, jsonl, zip, coco (box projects; a zip with the images when -o ends in .zip), "
            "hf (a Hugging Face dataset folder at -o DIR), lmms-eval (an lmms-eval task "
            "folder at -o DIR, for --include_path; every protocol but video rating), or one of the "
            "protocol's authors' formats (a folder at -o DIR, or a zip when -o ends in .zip)",
        )
        add_actor_argument(parser)

    def handle(self, *args, **opts):
        release = (
            Release.objects.select_related("project")
            .filter(project__slug=opts["project"], version=opts["version"])
            .first()
        )
        if release is None:
            raise CommandError(f"no release {opts['version']!r} in project {opts['project']!r}")
        self.actor = command_actor(opts["actor"], release.project)  # the release export API's role: researcher
        with on_command_line():
            return self._export(release, opts)

    def _export(self, release, opts):
        out_name = opts["output"]
        if opts["push_to_hub"] and opts["format"] != "hf":
            raise CommandError("--push-to-hub needs --format hf")
        if opts["format"] and opts["format"] not in OWN_FORMATS:
            return self._authors(release, opts["format"], out_name)
        if opts["format"] == "hf":
            return self._hf(release, out_name, opts["push_to_hub"])
        if opts["format"] == "lmms-eval":
            return self._lmms(release, out_name)
        zipped = (out_name or "").endswith(".zip")
        if opts["format"] == "coco":
            fmt = "coco_zip" if zipped else "coco"
        elif opts["format"]:
            fmt = opts["format"]
        else:
            fmt = "jsonl" if opts["jsonl"] else "zip" if opts["zip"] or zipped else "json"
        assert fmt in EXPORT_FORMATS
        if fmt in ("zip", "coco_zip") and not out_name:
            raise CommandError("a zip export needs -o FILE")
        try:
            chunks = release_export(release, fmt)
        except ReleaseRefused as exc:
            raise CommandError(str(exc)) from exc
        stream = open(out_name, "wb") if out_name else sys.stdout.buffer
        try:
            for chunk in chunks:
                stream.write(chunk)
        finally:
            if out_name:
                stream.close()
            else:
                stream.flush()
        release_export_record(release=release, fmt=fmt, actor=self.actor)
        if out_name:
            self.stderr.write(f"{release}: {release.item_count} items -> {out_name} ({fmt})")

    def _authors(self, release, name, out_name):
        protocol = release.project.protocol
        if name not in {f.name for f in authors_export_formats(protocol)}:
            theirs = ", ".join(f.name for f in authors_export_formats(protocol))
            raise CommandError(
                f"unknown format {name!r}; use one of {', '.join(OWN_FORMATS)}"
                + (f", or one of the authors' formats of protocol {protocol}: {theirs}" if theirs else "")
            )
        if not out_name:
            raise CommandError(f"an export in the authors' format {name} needs -o DIR (or -o FILE.zip)")
        try:
            if out_name.endswith(".zip"):
                self._authors_zip(release, name, Path(out_name))
                summary = {"items": release.item_count}
            else:
                summary = authors_export(release, name, Path(out_name))
        except AuthorsExportError as exc:
            raise CommandError(f"{exc}; nothing was written") from exc
        release_export_record(release=release, fmt=name, actor=self.actor)
        self.stderr.write(f"{release}: {summary['items']} items -> {out_name} ({name})")

    @staticmethod
    def _authors_zip(release, name, target: Path):
        """The zip written beside its name and renamed into place: all or nothing."""
        chunks = authors_zip_stream(release, name)  # AuthorsExportError here, before any file
        partial = target.with_name(f".{target.name}.partial")
        try:
            with open(partial, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
            os.replace(partial, target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    def _hf(self, release, out_name, repo_id):
        if not out_name:
            raise CommandError("a dataset folder export needs -o DIR")
        try:
            summary = hf_export(release, Path(out_name))
        except HFFolderError as exc:
            raise CommandError(str(exc)) from exc
        release_export_record(release=release, fmt="hf", actor=self.actor)
        self.stderr.write(f"{release}: {summary['items']} items in {summary['shards']} shard(s) -> {out_name} (hf)")
        if repo_id:
            self._push(Path(out_name), repo_id, release)

    def _lmms(self, release, out_name):
        if not out_name:
            raise CommandError("an lmms-eval task export needs -o DIR")
        try:
            summary = lmms_export(release, Path(out_name))
        except LmmsExportError as exc:
            raise CommandError(str(exc)) from exc
        release_export_record(release=release, fmt="lmms-eval", actor=self.actor)
        self.stderr.write(
            f"{release}: {summary['items']} items, {summary['documents']} documents -> {out_name} "
            f"(lmms-eval task {summary['task']}: lmms-eval --include_path {out_name} --tasks {summary['task']})"
        )

    def _push(self, folder, repo_id, release):
        """Upload the dataset folder (the only network use of StateLab outside model endpoints)."""
        token = os.environ.get("HF_TOKEN")
        if not token:
            raise CommandError("--push-to-hub needs HF_TOKEN in the environment; the folder is written")
        try:
            from huggingface_hub import HfApi
        except ImportError as exc:
            raise CommandError("--push-to-hub needs the huggingface_hub package; the folder is written") from exc
        api = HfApi(token=token)
        api.create_repo(repo_id, repo_type="dataset", private=True, exist_ok=True)
        info = api.upload_folder(
            repo_id=repo_id,
            repo_type="dataset",
            folder_path=str(folder),
            commit_message=f"StateLab release {release.project.slug} {release.version} ({release.checksum[:12]})",
        )
        release_export_record(release=release, fmt="hf", actor=self.actor, hub_repo=repo_id)
        self.stderr.write(f"pushed to {getattr(info, 'commit_url', repo_id)}")
