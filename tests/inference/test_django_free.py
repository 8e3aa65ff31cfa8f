"""The prompt modules are plain Python (usable from a notebook): each protocol's prompts turn items
into queries and, for the multistage strategy, return the replies; the chunk code in
inference.services makes the predictions. Checked by importing them without Django, and on the source, where a late
(function-level) import of Django, the models or the services would hide from the first check."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "inference.prompting",
    "protocols.kit.prompting",
    "protocols.status.prompts",
    "protocols.changeit.prompts",
    "protocols.visualtrans.prompts",
    "protocols.m3verse.prompts",
    "protocols.oscbench.prompts",
    "protocols.arena.prompts",
    "protocols.m3verse.multistage",
]
SOURCES = [ROOT / (m.replace(".", "/") + ".py") for m in MODULES]
FORBIDDEN = ("django", "inference.models", "inference.services", "inference.selectors", "inference.tasks")


def test_protocol_modules_do_not_import_django():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in MODULES)
        + "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "[]"


def late_or_not_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_no_protocol_module_imports_django_models_or_services_even_late():
    offenders = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in SOURCES
        for module in sorted(late_or_not_imports(path))
        if any(module == f or module.startswith(f + ".") for f in FORBIDDEN)
    ]
    assert offenders == []
    prompt_modules = {
        f"protocols.{p.parent.name}.{p.stem}"
        for p in (ROOT / "protocols").glob("*/*.py")
        if p.stem in ("prompts", "multistage")
    }
    assert prompt_modules == set(MODULES[2:])
