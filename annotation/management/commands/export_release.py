"""python manage.py export_release <project> <version> [-o FILE] [--jsonl | --zip | --format F] [--actor USERNAME]

Each export is recorded in the audit trail (as a download from the releases page is), under
--actor when given, with source=cli.
"""

import os
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.interchange.hf import HFFolderError, hf_export
from annotation.interchange.lmms_eval import LmmsExportError, lmms_export
from annotation.management.actor import add_actor_argument, command_actor, on_command_line
from annotation.models import Release
from annotation.releases import EXPORT_FORMATS, ReleaseRefused, release_export, release_export_record


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
            choices=["json", "jsonl", "zip", "coco", "hf", "lmms-eval"],
            dest="format",
            help="json, jsonl, zip, coco (box projects; a zip with the images when -o ends in .zip), "
            "hf (a Hugging Face dataset folder at -o DIR) or lmms-eval (an lmms-eval task "
            "folder at -o DIR, for --include_path; every protocol but video rating)",
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
