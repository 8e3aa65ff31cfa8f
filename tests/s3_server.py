"""moto's standalone S3 server on loopback, in its own process, and a bucket on it that the default
storage points at (django-storages' S3 backend, the options a deployment sets): the fixtures of the
storage tests and of the browser test that shows media from the bucket."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import boto3
import httpx
import pytest
from botocore.config import Config

KEYS = {"access_key": "statelab-test", "secret_key": "statelab-test-secret", "region_name": "us-east-1"}
# What a deployment sets (README, docker-compose.yml): path-style addressing, Signature V4.
S3_OPTIONS = {"addressing_style": "path", "signature_version": "s3v4", **KEYS}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    """moto's S3 server on a free loopback port for this module's tests."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/moto-api/", timeout=2)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture
def bucket(s3_endpoint, settings):
    """A fresh bucket, and the default storage set to django-storages' S3 backend pointing at it."""
    name = f"statelab-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=KEYS["access_key"],
        aws_secret_access_key=KEYS["secret_key"],
        region_name=KEYS["region_name"],
        config=Config(s3={"addressing_style": "path"}),
    )
    client.create_bucket(Bucket=name)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {"bucket_name": name, "endpoint_url": s3_endpoint, **S3_OPTIONS},
        },
    }
    settings.MEDIA_SIGNED_URL_SECONDS = 120

    def objects() -> dict[str, bytes]:
        listed = client.list_objects_v2(Bucket=name).get("Contents", [])
        return {o["Key"]: client.get_object(Bucket=name, Key=o["Key"])["Body"].read() for o in listed}

    return {"name": name, "client": client, "objects": objects}


def zipped(folder: Path, archive: Path) -> Path:
    """The folder as a zip, the way a researcher uploads media with their items."""
    with zipfile.ZipFile(archive, "w") as zf:
        for p in folder.rglob("*"):
            if p.is_file():
                zf.write(p, p.relative_to(folder).as_posix())
    return archive
