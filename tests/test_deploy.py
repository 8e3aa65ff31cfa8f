"""docker-compose.yml describes the production deployment; validate it with the real client when present."""

import copy
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"


def test_compose_file_has_the_production_services_with_health_checks():
    spec = yaml.safe_load(COMPOSE.read_text())
    services = spec["services"]
    assert {n for n, s in services.items() if "profiles" not in s} == {
        "postgres",
        "redis",
        "web",
        "worker",
        "beat",
        "gpu-worker",
    }
    # Optional object storage for media (`--profile s3`): MinIO at a pinned release, and a one-shot bucket setup.
    assert {n: s["profiles"] for n, s in services.items() if "profiles" in s} == {"minio": ["s3"], "minio-init": ["s3"]}
    assert services["minio"]["image"].startswith("minio/minio:RELEASE.") and services["minio-init"]["image"].startswith(
        "minio/mc:RELEASE."
    )
    for name, service in services.items():
        assert "healthcheck" in service or service.get("restart") == "no", f"{name} has no health check"
    assert "gunicorn" in services["web"]["command"]
    # Behind the TLS proxy each client keeps its own address for the login lockout and the
    # wrong-token limit: the proxy count is set, not left at 0 (one shared address for everyone).
    assert services["web"]["environment"]["AXES_PROXY_COUNT"] == "${AXES_PROXY_COUNT:-1}"
    assert "-Q default,api" in services["worker"]["command"]
    assert "-Q gpu" in services["gpu-worker"]["command"] and "--concurrency 1" in services["gpu-worker"]["command"]
    devices = services["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    assert services["gpu-worker"]["build"]["args"]["LOCK"] == "gpu"
    assert (ROOT / ".ci/locks/gpu.txt").exists() and "vllm==" in (ROOT / ".ci/locks/gpu.txt").read_text()


def test_docker_compose_config_validates_when_the_client_is_present():
    docker = shutil.which("docker")
    if not docker or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        import pytest

        pytest.skip("docker compose client not installed here; structure checked by the test above")
    env = dict(os.environ, POSTGRES_PASSWORD="x", SECRET_KEY="y")
    out = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "-q"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


# The Compose Specification's own JSON schema (compose-spec/compose-spec, schema/compose-spec.json at
# commit 170098ba07d9, Apache-2.0), which `docker compose` validates every file against after
# interpolating variables. No compose client (a Go binary) can be installed here, so the test
# above is skipped and this one does the same validation with jsonschema.
COMPOSE_SCHEMA = ROOT / "tests" / "deploy_data" / "compose-spec.json"
# Compose's interpolation grammar: $$ (a literal $), $NAME, ${NAME}, ${NAME:-default}, ${NAME-default},
# ${NAME:?error}, ${NAME?error}, ${NAME:+alt}, ${NAME+alt}.
_VARIABLE = re.compile(
    r"\$(?:\$|([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\})"
)


def _interpolate(value, env: dict[str, str], where: str = ""):
    """Compose's variable substitution over the parsed file: unset variables take their default
    (`:-`), an unset `:?` variable is an error naming it, and a stray `$` is an error."""
    if isinstance(value, dict):
        return {k: _interpolate(v, env, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(2)
        op, arg = m.group(3), m.group(4) or ""
        have = name in env and (env[name] != "" or not (op or "").startswith(":"))
        if op in (":-", "-"):
            return env[name] if have else arg
        if op in (":?", "?"):
            if not have:
                raise ValueError(f"{where[1:]}: required variable {name} is missing: {arg}")
            return env[name]
        if op in (":+", "+"):
            return arg if have else ""
        return env.get(name, "")

    if "$" in _VARIABLE.sub("", value):
        raise ValueError(f"{where[1:]}: invalid interpolation in {value!r}")
    return _VARIABLE.sub(sub, value)


def _compose_problems(spec: dict, env: dict[str, str]) -> list[str]:
    """What `docker compose config` would refuse: schema errors after interpolation, and references
    to services, volumes or profiles that do not exist."""
    import json

    import jsonschema

    try:
        model = _interpolate({k: v for k, v in spec.items() if not k.startswith("x-")}, env)
    except ValueError as exc:
        return [str(exc)]
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    problems = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft7Validator(schema).iter_errors(model)
    ]
    services = model.get("services", {})
    volumes = set(model.get("volumes") or {})
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        for other in depends:
            if other not in services:
                problems.append(f"{name}: depends on undefined service {other}")
            elif not service.get("profiles") and services[other].get("profiles"):
                problems.append(
                    f"{name}: always started, but depends on {other} of profile(s) {services[other]['profiles']}"
                )
        for mount in service.get("volumes") or []:
            source = mount.split(":")[0] if isinstance(mount, str) else mount.get("source", "")
            if source and not source.startswith((".", "/", "~")) and source not in volumes:
                problems.append(f"{name}: volume {source} is not declared")
    return problems


def test_compose_file_validates_against_the_compose_specification_schema():
    spec = yaml.safe_load(COMPOSE.read_text())  # anchors and `<<` merges resolved as compose does
    env = {"POSTGRES_PASSWORD": "x", "SECRET_KEY": "y"}
    assert _compose_problems(spec, env) == []
    # Without the required secrets compose refuses to start, naming the variable.
    assert any("SECRET_KEY is missing" in p for p in _compose_problems(spec, {"POSTGRES_PASSWORD": "x"}))
    # The validation finds what compose would refuse (so the check above can fail).
    broken = copy.deepcopy(spec)
    broken["services"]["minio"]["command"] = "server ${DATA"
    assert ["services.minio.command: invalid interpolation in 'server ${DATA'"] == _compose_problems(broken, env)
    broken = copy.deepcopy(spec)
    broken["services"]["web"]["ports"] = "8000:8000"
    broken["services"]["worker"]["restart_policy"] = "always"
    broken["services"]["beat"]["depends_on"] = {"minio": {"condition": "service_healthy"}}
    broken["services"]["redis"]["volumes"] = ["cache:/data"]
    problems = "\n".join(_compose_problems(broken, env))
    assert "services.web.ports: '8000:8000' is not of type 'array'" in problems, problems
    assert "services.worker: 'restart_policy' does not match" in problems, problems
    assert (
        "beat: always started, but depends on minio" in problems and "redis: volume cache is not declared" in problems
    ), problems


def _dockerignored(patterns: list[str], path: str) -> bool:
    """Docker's rule, enough for our patterns: a pattern (Go filepath.Match syntax, `**` for any
    depth) excludes a path when it matches the path or one of its parent folders."""
    import re

    def regex(pattern: str) -> re.Pattern:
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            elif pattern[i] == "?":
                out, i = out + "[^/]", i + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        return re.compile(out + "$")

    compiled = [regex(p.strip().rstrip("/")) for p in patterns if p.strip() and not p.startswith("#")]
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    return any(r.match(prefix) for r in compiled for prefix in prefixes)


def test_dockerignore_keeps_what_the_image_build_needs_and_drops_the_rest():
    patterns = (ROOT / ".dockerignore").read_text().splitlines()
    assert not any(p.startswith("!") for p in patterns)  # the matcher above does not do exceptions
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY . /app" in dockerfile and '--require-hashes --no-deps -r ".ci/locks/${LOCK}.txt"' in dockerfile
    assert "ARG LOCK=app" in dockerfile and "--no-build-isolation" in dockerfile
    needed = [
        "pyproject.toml",
        "README.md",
        "manage.py",
        ".ci/locks/app.txt",
        ".ci/locks/gpu.txt",
        "config/settings.py",
        "annotation/models.py",
        "inference/tasks.py",
        "evaluation/__init__.py",
        "templates/base.html",
        "static/js/workbench.js",
    ]
    for path in needed:
        assert (ROOT / path).exists(), path
        assert not _dockerignored(patterns, path), path
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    includes = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    top = {pattern.rstrip("*") for pattern in includes} | {"templates", "static"}
    packaged = [p for p in tracked if p.split("/")[0] in top]
    assert packaged and [p for p in packaged if _dockerignored(patterns, p)] == []
    for path in [
        ".git/HEAD",
        ".venv/bin/python",
        ".venv-vllm/bin/python",
        "var/media/assets/a.png",
        "annotation/__pycache__/models.cpython-311.pyc",
        "staticfiles/css/app.css",
        "docs/screenshots/box.png",
        "static/node_modules/x/index.js",
        "statelab.egg-info/PKG-INFO",
        ".env",
        "bench/out/run.json",
    ]:
        assert _dockerignored(patterns, path), path


def test_readme_deploy_section_covers_every_compose_service_and_key_passing():
    readme = (ROOT / "README.md").read_text()
    deploying = readme[readme.index("## Deploying") :]
    for service in yaml.safe_load(COMPOSE.read_text())["services"]:
        name = {"web": "web app", "worker": "CPU worker", "gpu-worker": "GPU worker"}.get(service, service)
        assert name.lower() in deploying.lower(), service
    assert "OPENAI_API_KEY" in COMPOSE.read_text() and "only `OPENAI_API_KEY`" in deploying
    assert "api_key_env" in deploying


# --- production is secure by default -----------------------------------------------------------------


def _compose_env() -> dict[str, str]:
    """The app environment docker-compose.yml gives every service, with the operator's values."""
    spec = yaml.safe_load(COMPOSE.read_text())
    env = {}
    for key, value in spec["services"]["web"]["environment"].items():
        value = str(value)
        if value.startswith("${"):
            name, _, default = value[2:-1].partition(":-")
            name = name.split(":?")[0]
            value = {
                "SECRET_KEY": "a-long-random-production-key-" + "x" * 40,
                "POSTGRES_PASSWORD": "pw",
                "ALLOWED_HOSTS": "statelab.example.org",
            }.get(name, default)
        env[key] = value.replace("${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}", "pw")
    return env


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    import sys

    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_the_compose_settings(tmp_path):
    env = _compose_env()
    assert env["DEBUG"] == "0" and env["STATELAB_HTTPS"] == "1"
    env.update(
        DATABASE_URL=os.environ.get("DATABASE_URL", ""),
        REDIS_URL=os.environ.get("REDIS_URL", ""),
        MEDIA_ROOT=str(tmp_path / "media"),
        STATELAB_CACHE_ROOT=str(tmp_path / "cache"),
    )
    out = _manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert out.returncode == 0, out.stdout + out.stderr


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    out = _manage({"DEBUG": "0", "STATELAB_DATA_DIR": str(tmp_path)}, "check")
    assert out.returncode != 0
    assert "SECRET_KEY is not set" in out.stderr


def test_passwords_are_validated():
    import django.contrib.auth.password_validation as pv
    import pytest
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        pv.validate_password("a")
    with pytest.raises(ValidationError):
        pv.validate_password("password123")
    pv.validate_password("lemon-sliced-door-ajar-42")
