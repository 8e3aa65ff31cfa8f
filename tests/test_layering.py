"""DESIGN.md: data flows annotation -> inference -> evaluation; evaluation reads the other two and
nothing imports evaluation. Checked on the source (every import statement, late ones included)."""
import ast

import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def offenders(app: str, forbidden: tuple[str, ...]) -> list[str]:
    out = []
    for path in sorted((ROOT / app).rglob("*.py")):
        for module in imported_modules(path):
            if module.split(".")[0] in forbidden:
                out.append(f"{path.relative_to(ROOT)}: {module}")
    return out


def test_annotation_and_inference_never_import_evaluation():
    assert offenders("annotation", ("evaluation", "inference")) == []
    assert offenders("inference", ("evaluation",)) == []


def test_the_check_sees_a_late_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from evaluation import leaderboard\n    import evaluation.selectors\n")
    assert imported_modules(module) == {"evaluation", "evaluation.selectors"}


def test_results_json_scorer_is_wired_by_settings(settings):
    from types import SimpleNamespace

    from inference.selectors import job_metrics

    job = SimpleNamespace(mode="evaluate", protocol="status")
    settings.STATELAB_JOB_METRICS = None
    assert job_metrics(job) is None
    settings.STATELAB_JOB_METRICS = "evaluation.no_such_module.job_metrics"
    assert job_metrics(job)["error"].startswith("scorer evaluation.no_such_module.job_metrics cannot be imported")
    settings.STATELAB_JOB_METRICS = "tests.test_layering.fake_scorer"
    assert job_metrics(job) == {"scored": "status"}
    assert job_metrics(SimpleNamespace(mode="suggest", protocol="status")) is None


def fake_scorer(job):
    return {"scored": job.protocol}


# --- one job per module: no import cycles between files, no module over 500 lines ------------------
# STYLE.md: services never import tasks, selectors never import services, and no two files import
# each other, not even behind a function-level import (that only hides the cycle from Python).

APPS = ("annotation", "inference", "evaluation", "config")
MAX_LINES = 500


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports anywhere in its source (relative imports
    resolved; `from package import name` counts the submodule when `name` is one)."""
    files = {module_name(p, root): p for pkg in packages for p in (root / pkg).rglob("*.py")
             if "migrations" not in p.parts}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        here = name.split(".") if is_package else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    targets.add(sub if sub in files else module)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def test_no_import_cycle_between_files():
    assert import_cycles(module_graph(ROOT, APPS)) == []


def test_the_cycle_check_sees_a_late_import(tmp_path):
    pkg = tmp_path / "app"
    (pkg / "queue").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "queue" / "__init__.py").write_text("from .claim import claim\n")
    (pkg / "queue" / "claim.py").write_text("from ..selectors import counts\n\ndef claim():\n    pass\n")
    (pkg / "selectors.py").write_text("def counts():\n    from .queue import claim\n")
    (pkg / "tasks.py").write_text("from . import selectors\n")
    graph = module_graph(tmp_path, ("app",))
    assert graph["app.tasks"] == {"app.selectors"}
    assert graph["app.selectors"] == {"app.queue.claim"}
    assert import_cycles(graph) == [["app.queue.claim", "app.selectors"]]


def test_no_app_module_over_500_lines():
    long = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert long == []


# Files that are copied out of StateLab and run where it cannot be imported: they carry their own
# copy on purpose, kept equal by a property test (tests/annotation/test_lmms_eval_export.py).
STANDALONE = {"annotation/interchange/lmms_task_utils.py"}


def definitions(name: str) -> list[str]:
    """Where a function or a module-level constant called `name` is defined in the apps (the
    standalone templates aside)."""
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if str(path.relative_to(ROOT)) in STANDALONE:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                    found.append(str(path.relative_to(ROOT)))
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                    found.append(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("name,home", [
    ("coincidence_matrix", "annotation/reliability.py"),  # the core of Krippendorff's alpha
    ("probe_video", "annotation/media_probe.py"),
    ("ffmpeg_exe", "annotation/media_probe.py"),
    ("LETTERS", "annotation/protocols.py"),
    ("OSC_CRITERIA", "annotation/protocols.py"),
])
def test_shared_pieces_are_defined_once(name, home):
    assert definitions(name) == [home]
