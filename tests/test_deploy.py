"""docker-compose.yml describes the production deployment; validate it with the real client when present."""
import os
import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"


def test_compose_file_has_the_production_services_with_health_checks():
    spec = yaml.safe_load(COMPOSE.read_text())
    services = spec["services"]
    assert set(services) == {"postgres", "redis", "web", "worker", "beat", "gpu-worker"}
    for name, service in services.items():
        assert "healthcheck" in service, f"{name} has no health check"
    assert "gunicorn" in services["web"]["command"]
    assert "-Q default,api" in services["worker"]["command"]
    assert "-Q gpu" in services["gpu-worker"]["command"] and "--concurrency 1" in services["gpu-worker"]["command"]
    devices = services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    assert services["gpu-worker"]["build"]["args"]["EXTRAS"] == "gpu"


def test_docker_compose_config_validates_when_the_client_is_present():
    docker = shutil.which("docker")
    if not docker or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        import pytest

        pytest.skip("docker compose client not installed here; structure checked by the test above")
    env = dict(os.environ, POSTGRES_PASSWORD="x", SECRET_KEY="y")
    out = subprocess.run([docker, "compose", "-f", str(COMPOSE), "config", "-q"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
