"""Scoring, statistics, tables and charts import nothing from Django (usable from a notebook)."""

import subprocess
import sys
from pathlib import Path

MODULES = [
    "protocols.kit.bootstrap",
    "protocols.kit.matrix",
    "protocols.kit.items",
    "protocols.kit.clustered",
    "protocols.kit.paired",
    "protocols.kit.power",
    "protocols.kit.pairwise",
    "protocols.kit.releases",
    "protocols.kit.csv_cells",
    "protocols.status.scoring",
    "protocols.changeit.scoring",
    "protocols.visualtrans.scoring",
    "protocols.m3verse.scoring",
    "protocols.oscbench.scoring",
    "evaluation.scoring.answer_sets",
    "evaluation.stats",
    "evaluation.tables",
    "evaluation.charts",
    "evaluation.ranking",
    # Upstream pieces they share: constants, alpha, the answer normaliser, the video probe.
    "annotation.protocols",
    "annotation.reliability",
    "annotation.canonical",
    "annotation.results",
    "annotation.media.probe",
    "protocols.kit.answers",
    "inference.media",
    "protocols.normalize",
]


def test_pure_modules_do_not_import_django():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in MODULES)
        + "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "[]"
