"""Seed the private stack's database (run in a subprocess with the stack's environment).

python -m tests.faults.seed annotation --items 2000 --annotators 8
    a ChangeIt project `faults` (2 annotations per item; items inserted by the same
    INSERT ... SELECT generate_series as bench/bench_queue.py), annotators with API tokens and
    a researcher with a password for the pages; prints JSON {slug, project, annotators: [{id,
    username, token}], researcher: {username, password}}
python -m tests.faults.seed job --slug faults-job --items 40 --base-url http://127.0.0.1:PORT/v1 --workdir DIR
    a VisualTrans project with a verified release of real PNG items (the inference tests'
    factories), an OpenAI-compatible endpoint and an evaluation job, started (start_job is
    sent to the broker on commit); prints JSON {job, items}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from annotation.models import Membership, Project, Role  # noqa: E402

PAYLOAD = '{"image": "faults.jpg", "object": "apple", "state": "whole apple", "distractors": ["peeled apple"]}'
RESEARCHER_PASSWORD = "faults-researcher-pw-4821"


def seed_annotation(items: int, annotators: int) -> dict:
    User = get_user_model()
    with transaction.atomic():
        project = Project.objects.create(
            slug="faults",
            name="Fault tests",
            protocol="changeit",
            annotations_per_item=2,
            settings={"lease_seconds": 600},
        )
        with connection.cursor() as c:
            c.execute(
                """INSERT INTO annotation_item (project_id, external_id, payload, media, status, split, tags, is_gold,
                                                annotation_count, created_at, updated_at)
                   SELECT %s, 'f' || g, %s::jsonb, '{}'::jsonb, 'pending', 'test', '[]'::jsonb, false, 0, now(), now()
                   FROM generate_series(1, %s) AS g""",
                [project.pk, PAYLOAD, items],
            )
        people = []
        for i in range(annotators):
            user = User.objects.create_user(f"fa{i}", f"fa{i}@example.org")
            user.set_unusable_password()
            user.save()
            Membership.objects.create(project=project, user=user, role=Role.ANNOTATOR)
            people.append({"id": user.pk, "username": user.username, "token": Token.objects.create(user=user).key})
        researcher = User.objects.create_user("faults-researcher", "fr@example.org", RESEARCHER_PASSWORD)
        Membership.objects.create(project=project, user=researcher, role=Role.RESEARCHER)
    with connection.cursor() as c:
        c.execute("ANALYZE annotation_item")
    return {
        "slug": project.slug,
        "project": project.pk,
        "annotators": people,
        "researcher": {"username": researcher.username, "password": RESEARCHER_PASSWORD},
    }


def seed_job(slug: str, items: int, base_url: str, workdir: Path) -> dict:
    from inference import services
    from tests.inference import factories

    with transaction.atomic():
        project = Project.objects.create(slug=slug, name=f"Fault tests: {slug}", protocol="visualtrans")
        made = factories.visualtrans_items(project, items, workdir)
        release = factories.release_of(project, made)
        endpoint = services.endpoint_create(
            name="standin", backend="openai", model_id="m", base_url=base_url, concurrency=2, options={}
        )
        job = services.job_create(endpoint=endpoint, project=project, release=release, params={"chunk_size": 4})
    return {"job": job.pk, "items": [i.pk for i in made]}


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    a = sub.add_parser("annotation")
    a.add_argument("--items", type=int, default=2000)
    a.add_argument("--annotators", type=int, default=8)
    j = sub.add_parser("job")
    j.add_argument("--slug", default="faults-job")
    j.add_argument("--items", type=int, default=40)
    j.add_argument("--base-url", required=True)
    j.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    if args.what == "annotation":
        out = seed_annotation(args.items, args.annotators)
    else:
        out = seed_job(args.slug, args.items, args.base_url, args.workdir)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
