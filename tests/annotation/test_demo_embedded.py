"""The README's first command runs the demo on the embedded PostgreSQL (config/demo_database.py):
`manage.py demo --no-serve` in a subprocess without DATABASE_URL starts the server from the wheel,
sets everything up and stops it again; then, on the same data directory, an annotator claims,
drafts and submits a task of every workflow through the JSON API (the queue's statements, as in
production), a repeat submit is answered idempotently, and the researcher's pages load.

The data directory lives in a temporary folder of its own, not under pytest's: run as root,
PostgreSQL runs as another user, which must reach the folder (pytest resets its own to 0700).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()
from django.conf import settings
from django.db import connection, connections
from django.http import HttpRequest
from django.test import Client

from config.demo_database import embedded_postgres

settings.ALLOWED_HOSTS = ["*"]
SCORES = {"subject": 4, "object": 5, "action": 4, "osc_accuracy": 3, "osc_consistency": 3, "scene": None,
          "realism": 2, "aesthetics": 3}


def result_for(item):
    w = item["workflow"]
    if w == "quintuplet":
        return {"state_a": "a closed jar", "state_b": "an open jar", "change": "open the jar",
                "change_distractors": ["close the jar", "fill the jar", "break the jar"],
                "category": "functional", "difference": "slight"}
    if w == "box":
        return {"bbox": [1, 2, 10, 10], "state": item["candidates"][0]}
    if w == "rating":
        return {"scores": SCORES}
    fmt = item["format"]
    if fmt == "choice":
        return {"answer": ["A"] if item["multiple"] else "A", "flags": []}
    if fmt == "count":
        return {"answer": 2, "flags": []}
    return {"answer": ["cup"], "flags": []}



def drive():
    out = {}
    annotator, researcher = Client(), Client()
    assert annotator.login(request=HttpRequest(), username="annotator1", password="annotator1-demo")
    assert researcher.login(request=HttpRequest(), username="researcher", password="researcher-demo")
    for slug in ["demo-status", "demo-changeit", "demo-visualtrans", "demo-m3verse", "demo-oscbench"]:
        got = {}
        r = annotator.post(f"/api/projects/{slug}/tasks/next/")
        got["next"] = r.status_code
        body = r.json()
        task, item = body["task"], body["item"]
        again = annotator.post(f"/api/projects/{slug}/tasks/next/").json()["task"]
        got["reload_same_task"] = again == task
        r = annotator.put(f"/api/tasks/{task}/draft/", {"draft": {"note": "half done"}, "version": body["version"]},
                          content_type="application/json")
        got["draft"] = r.status_code
        result = result_for(item)
        r = annotator.post(f"/api/tasks/{task}/submit/", {"result": result}, content_type="application/json",
                           HTTP_IDEMPOTENCY_KEY=f"k-{slug}")
        got["submit"] = r.status_code
        if r.status_code >= 400:
            got["submit_error"] = [item, r.json()]
        r = annotator.post(f"/api/tasks/{task}/submit/", {"result": result}, content_type="application/json",
                           HTTP_IDEMPOTENCY_KEY=f"k-{slug}")
        got["repeat"] = r.status_code
        r = annotator.post(f"/api/projects/{slug}/tasks/next/")
        got["next_after"] = r.status_code
        got["next_is_new"] = r.status_code == 204 or r.json()["task"] != task
        got["pages"] = {
            path: researcher.get(path).status_code
            for path in [f"/projects/{slug}/annotate/", f"/projects/{slug}/review/", f"/projects/{slug}/agreement/",
                         f"/api/projects/{slug}/agreement/", f"/projects/{slug}/leaderboard/", f"/projects/{slug}/"]
        }
        out[slug] = got

    # Without Redis Celery runs eagerly: an upload on the Import page is done when the page answers.
    from django.core.files.uploadedfile import SimpleUploadedFile
    line = json.dumps({"id": "demo-upload-1", "image_a": "nowhere/a.png", "image_b": "nowhere/b.png"}) + "\n"
    r = researcher.post("/projects/demo-status/import/",
                        {"file": SimpleUploadedFile("one.jsonl", line.encode()), "kind": "items"}, follow=True)
    html = r.content.decode()
    out["upload"] = {"status": r.status_code, "redirected": bool(r.redirect_chain),
                     "refused": 'data-status="refused"' in html,
                     "names_line": "line 1: field image_a: nowhere/a.png" in html}
    return out


database = settings.DATABASES["default"]
with embedded_postgres(settings.EMBEDDED_POSTGRES_DIR, database=database["NAME"]) as where:
    database.update(where)
    out = drive()
    out["server"] = {"host": connection.settings_dict["HOST"] == where["HOST"],
                     "pid_file": (settings.EMBEDDED_POSTGRES_DIR / "postmaster.pid").exists()}
    connections.close_all()
print("RESULT " + json.dumps(out))
"""


def test_demo_runs_on_the_embedded_postgres_and_every_workflow_takes_an_annotation():
    with tempfile.TemporaryDirectory(prefix="statelab-demo-") as folder:
        var = Path(folder) / "var"
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(STATELAB_DATA_DIR=str(var), MEDIA_ROOT=str(var / "media"), STATELAB_CACHE_ROOT=str(var / "cache"))
        demo = subprocess.run(
            [sys.executable, "manage.py", "demo", "--no-serve"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert demo.returncode == 0, demo.stderr[-3000:]
        assert (var / "postgres" / "PG_VERSION").exists()
        assert not (var / "postgres" / "postmaster.pid").exists()  # stopped when the command ended

        run = subprocess.run(
            [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert not (var / "postgres" / "postmaster.pid").exists()
    (line,) = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
    got = json.loads(line[len("RESULT ") :])

    assert got.pop("server") == {"host": True, "pid_file": True}
    assert got.pop("upload") == {"status": 200, "redirected": True, "refused": True, "names_line": True}
    assert sorted(got) == ["demo-changeit", "demo-m3verse", "demo-oscbench", "demo-status", "demo-visualtrans"]
    for slug, g in got.items():
        assert (g["next"], g["reload_same_task"], g["draft"]) == (200, True, 200), slug
        assert (g["submit"], g["repeat"]) == (201, 200), (slug, g.get("submit_error"))
        assert g["next_after"] in (200, 204) and g["next_is_new"], slug
        assert set(g["pages"].values()) == {200}, (slug, g["pages"])
