"""The layering of every top-level package of the project, checked on the source: each package is
found (a folder of the repository with an __init__.py; the tests aside), not listed, and every
import statement counts, a late one (inside a function) included: it only hides an import from
Python until the function runs, never from a reader.

- docs/architecture.md, "One-way flow": data flows annotation -> inference -> evaluation;
  evaluation reads the other two and nothing imports evaluation. The API client
  (statelab_client) imports none of the server's code.
- No import cycle between packages (config/ is settings and wiring: the apps may use its
  infrastructure, so it imports no app; it names them by dotted path in settings and urls), and
  none between files.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_PACKAGES = {"tests"}  # the suite imports every package by design


def find_packages(root: Path) -> tuple[str, ...]:
    """The top-level packages under `root`: folders holding an __init__.py (hidden ones and the
    tests aside)."""
    return tuple(
        sorted(
            init.parent.name
            for init in root.glob("*/__init__.py")
            if init.parent.name not in NOT_PACKAGES and not init.parent.name.startswith(".")
        )
    )


PACKAGES = find_packages(ROOT)


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


def test_the_packages_are_found_not_listed():
    assert {"annotation", "config", "evaluation", "inference", "statelab_client"} <= set(PACKAGES)
    assert "tests" not in PACKAGES


def test_the_package_search_sees_a_new_package(tmp_path):
    for name in ("app", "shared", ".hidden", "tests"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "notes").mkdir()  # no __init__.py: not a package
    assert find_packages(tmp_path) == ("app", "shared")


def test_annotation_and_inference_never_import_evaluation():
    assert offenders("annotation", ("evaluation", "inference")) == []
    assert offenders("inference", ("evaluation",)) == []


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "evaluation"])
def test_nothing_imports_evaluation(package):
    assert offenders(package, ("evaluation",)) == []


def test_the_api_client_imports_no_server_code():
    server = tuple(p for p in PACKAGES if p != "statelab_client") + ("django", "rest_framework", "celery")
    assert offenders("statelab_client", server) == []


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
# docs/architecture.md, "One-way flow": services never import tasks, selectors never import services,
# and no two files import each other, not even behind a function-level import (that only hides the
# cycle from Python).

MAX_LINES = 500
# The size rule holds for the test modules too (every *.py under tests/, helpers and conftests
# included); only migrations are left out, in the packages and the tests alike.
SIZE_CHECKED = PACKAGES + ("tests",)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class _ImportStatements(ast.NodeVisitor):
    """Every import statement of a module, each with whether it sits inside a function (late)."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
        self.depth = 0

    def _function(self, node) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Import(self, node) -> None:
        self.found.append((node, self.depth > 0))

    visit_ImportFrom = visit_Import


def module_edges(root: Path, packages: tuple[str, ...]) -> dict[str, dict[str, bool]]:
    """Module -> {module of `packages` it imports: whether only late (inside a function)}, relative
    imports resolved; `from package import name` counts the submodule when `name` is one."""
    files = {
        module_name(p, root): p for pkg in packages for p in (root / pkg).rglob("*.py") if "migrations" not in p.parts
    }
    edges: dict[str, dict[str, bool]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        here = name.split(".") if is_package else name.split(".")[:-1]
        visitor = _ImportStatements()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        targets: dict[str, bool] = {}
        for node, late in visitor.found:
            if isinstance(node, ast.Import):
                found = {alias.name for alias in node.names}
            else:
                if node.level:
                    base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                found = {f"{module}.{a.name}" if f"{module}.{a.name}" in files else module for a in node.names}
            for target in found:
                if target in files and target != name:
                    targets[target] = targets.get(target, True) and late
        edges[name] = targets
    return edges


def module_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports anywhere in its source."""
    return {name: set(targets) for name, targets in module_edges(root, packages).items()}


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


def package_cycles(edges: dict[str, dict[str, bool]], shown: int = 3) -> list[list[str]]:
    """Each cycle between top-level packages, as the package imports that make it ("a -> b:" and
    the first `shown` imports behind it, "(late)" for one only inside a function): a cycle hidden
    behind a late import is a cycle all the same."""
    top = {module: module.split(".")[0] for module in edges}
    between: dict[tuple[str, str], list[str]] = {}
    for module, targets in edges.items():
        for target, late in targets.items():
            if top[target] != top[module]:
                between.setdefault((top[module], top[target]), []).append(
                    f"{module} -> {target}" + (" (late)" if late else "")
                )
    graph: dict[str, set[str]] = {}
    for source, target in between:
        graph.setdefault(source, set()).add(target)
    found = []
    for cycle in import_cycles(graph):
        found.append(
            [
                f"{source} -> {target}: "
                + "; ".join(sorted(imports)[:shown])
                + (f"; +{len(imports) - shown} more" if len(imports) > shown else "")
                for (source, target), imports in sorted(between.items())
                if source in cycle and target in cycle
            ]
        )
    return found


def test_no_import_cycle_between_packages():
    assert package_cycles(module_edges(ROOT, PACKAGES)) == []


def test_no_import_cycle_between_files():
    assert import_cycles(module_graph(ROOT, PACKAGES)) == []


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


def test_the_package_cycle_check_sees_a_late_import(tmp_path):
    # config/ wires the app by name; the app uses config's storage, and a late import back from
    # config into the app (the shape config/media.py had) closes a cycle between the packages.
    for name in ("config", "app"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "config" / "storage.py").write_text("import os\n")
    (tmp_path / "config" / "urls.py").write_text('ROUTES = ["app.views"]\n')
    (tmp_path / "app" / "views.py").write_text("from config.storage import os\n")
    edges = module_edges(tmp_path, ("app", "config"))
    assert package_cycles(edges) == []
    (tmp_path / "config" / "media.py").write_text("def serve():\n    from app import views\n")
    edges = module_edges(tmp_path, ("app", "config"))
    assert edges["config.media"] == {"app.views": True}
    assert edges["app.views"] == {"config.storage": False}
    assert package_cycles(edges) == [
        ["app -> config: app.views -> config.storage", "config -> app: config.media -> app.views (late)"]
    ]
    assert import_cycles(module_graph(tmp_path, ("app", "config"))) == []  # no cycle between files


def long_modules(root: Path, folders: tuple[str, ...]) -> list[str]:
    """Each module under `folders` (migrations aside) longer than MAX_LINES, with its length."""
    long = []
    for package in folders:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                long.append(f"{path.relative_to(root)}: {lines} lines")
    return long


def test_no_module_over_500_lines():
    assert "tests" in SIZE_CHECKED and set(PACKAGES) <= set(SIZE_CHECKED)
    assert long_modules(ROOT, SIZE_CHECKED) == []


def test_the_size_check_sees_a_long_test_module(tmp_path):
    (tmp_path / "tests" / "helpers").mkdir(parents=True)
    (tmp_path / "tests" / "migrations").mkdir()
    (tmp_path / "tests" / "test_short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "tests" / "helpers" / "table.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "tests" / "migrations" / "0001_initial.py").write_text("x = 1\n" * (MAX_LINES * 2))
    assert long_modules(tmp_path, ("tests",)) == [f"tests/helpers/table.py: {MAX_LINES + 1} lines"]


# Files that are copied out of StateLab and run where it cannot be imported: they carry their own
# copy on purpose, kept equal by a property test (tests/annotation/test_lmms_eval_export.py). The
# generic part of every lmms-eval task's utils.py (a protocol's own part copies nothing).
STANDALONE = {"protocols/kit/lmms_utils.py"}


def definitions(name: str) -> list[str]:
    """Where a function or a module-level constant called `name` is defined in the packages (the
    standalone templates aside)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
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


@pytest.mark.parametrize(
    "name,home",
    [
        ("coincidence_matrix", "annotation/reliability.py"),  # the core of Krippendorff's alpha
        ("probe_video", "annotation/media/probe.py"),
        ("ffmpeg_exe", "annotation/media/probe.py"),
        ("LETTERS", "protocols/base.py"),
        ("CRITERIA", "protocols/oscbench/fields.py"),  # the rating criteria
        ("RESULT_FIELDS", "protocols/status/__init__.py"),  # a quintuplet's fields
        ("QUINTUPLET_FIELDS", []),  # ... not copied under their old name
        ("QA_PROTOCOLS", []),  # the QA protocols: the registry's, by workflow
    ],
)
def test_shared_pieces_are_defined_once(name, home):
    assert definitions(name) == (home if isinstance(home, list) else [home])


# --- the shared layer names no protocol -------------------------------------------------------------
# A protocol is one package under protocols/ (one that defines `protocol`); the shared layer
# (annotation, evaluation, inference, config, background) reaches it through the registry and the
# hooks of protocols/base.py, never by importing it; its pages' files live in its package
# (protocols/<name>/templates/<name>/, protocols/<name>/static/<name>/: config/protocol_assets.py).
SHARED = ("annotation", "evaluation", "inference", "config", "background")


def protocol_packages(root: Path = ROOT) -> tuple[str, ...]:
    """The protocol packages under protocols/: folders whose __init__.py assigns `protocol`."""
    found = []
    for init in sorted((root / "protocols").glob("*/__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        if any(
            isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "protocol" for t in n.targets)
            for n in tree.body
        ):
            found.append(init.parent.name)
    return tuple(found)


def test_the_protocol_packages_are_found():
    assert {"status", "oscbench", "arena"} <= set(protocol_packages())
    assert "kit" not in protocol_packages()


@pytest.mark.parametrize("package", [p for p in SHARED if p in PACKAGES])
def test_the_shared_layer_imports_no_protocol(package):
    names = protocol_packages()
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == "protocols" and len(parts) > 1 and parts[1] in names:
                bad.append(f"{path.relative_to(ROOT)}: {module}")
    assert bad == []


def test_a_protocols_page_files_live_in_its_own_folder():
    """No shared template or static file is named after a protocol's form, and a protocol's own
    templates/ and static/ hold one folder named after the protocol."""
    for name in protocol_packages():
        package = ROOT / "protocols" / name
        for sub in ("templates", "static"):
            if (package / sub).is_dir():
                assert [p.name for p in (package / sub).iterdir()] == [name], f"protocols/{name}/{sub}"
    shared = [p.stem for p in (ROOT / "templates").rglob("*.html")] + [p.stem for p in (ROOT / "static").rglob("*.js")]
    assert set(shared) & set(protocol_packages()) == set()
