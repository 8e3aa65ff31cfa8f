"""Hugging Face dataset export and reload of a release, against the JSON export of the same release.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/statelab_bench \
        .venv/bin/python bench/bench_hf.py --items 10000

What it measures, in one run on one database (a scratch one: it makes projects bench-hf-* and
leaves them, as frozen releases protect their items; drop the database afterwards):
- baseline: the streamed JSON export of a verified N-item STATUS release (two images per item,
  `--distinct` different image pairs), consumed chunk by chunk;
- `export_release --format hf`: the Parquet shards with the images embedded, and the card;
- `datasets.load_dataset(DIR)` of that folder (a fresh cache), then reading every row's images;
- `import_items` of the folder into a new project (--create --verified), then a re-freeze whose
  checksum must equal the original release's.
Prints seconds and the ratio of each step to the JSON export.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--distinct", type=int, default=50, help="different image pairs among the items")
    args = ap.parse_args()

    import django

    django.setup()
    import datasets
    from django.core.management import call_command

    from annotation.importing import items_import
    from annotation.importing.samples import write_sample_dataset
    from annotation.models import Project
    from annotation.releases import release_export, release_freeze

    stamp = int(time.time())
    slug, copy_slug = f"bench-hf-{stamp}", f"bench-hf-copy-{stamp}"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        project = Project.objects.create(slug=slug, name=slug, protocol="status", option_seed=3)
        path = write_sample_dataset(tmp / "src", "status", args.items, distinct=args.distinct)
        items_import(project=project, path=path, verified=True)
        release = release_freeze(project=project, version="v1")

        t = time.perf_counter()
        size = sum(len(chunk) for chunk in release_export(release, "json"))
        json_s = time.perf_counter() - t

        t = time.perf_counter()
        call_command("export_release", slug, "v1", "--format", "hf", "-o", str(tmp / "hf"))
        hf_s = time.perf_counter() - t
        hf_bytes = sum(p.stat().st_size for p in (tmp / "hf").rglob("*") if p.is_file())

        t = time.perf_counter()
        split = datasets.load_dataset(str(tmp / "hf"), cache_dir=str(tmp / "cache"))["test"]
        pixels = sum(row["image_a"].size[0] + row["image_b"].size[0] for row in split)
        load_s = time.perf_counter() - t
        assert split.num_rows == args.items and pixels > 0

        t = time.perf_counter()
        call_command("import_items", copy_slug, str(tmp / "hf"), "--create", "--verified")
        copy = Project.objects.get(slug=copy_slug)
        again = release_freeze(project=copy, version="v1")
        import_s = time.perf_counter() - t
        assert again.checksum == release.checksum, "the reloaded copy differs from the release"

    print(f"| step ({args.items:,} STATUS items, {args.distinct} distinct image pairs) | seconds | vs JSON export |")
    print("|---|---|---|")
    print(f"| JSON export (baseline, {size / 1e6:.1f} MB) | {json_s:.2f} | 1.0× |")
    print(f"| HF export (Parquet with images, {hf_bytes / 1e6:.1f} MB) | {hf_s:.2f} | {hf_s / json_s:.1f}× |")
    print(f"| load_dataset + decode every image | {load_s:.2f} | {load_s / json_s:.1f}× |")
    print(f"| import_items of the folder + re-freeze (checksum equal) | {import_s:.2f} | {import_s / json_s:.1f}× |")


if __name__ == "__main__":
    main()
