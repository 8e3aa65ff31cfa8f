"""DESIGN.md: data flows annotation -> inference -> evaluation; evaluation reads the other two and
nothing imports evaluation. Checked on the source (every import statement, late ones included)."""
import ast
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
