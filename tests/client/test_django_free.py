"""The client talks HTTP only: importing it (and its command) loads no Django and no StateLab app."""

from __future__ import annotations

import subprocess
import sys


def test_statelab_client_imports_no_django():
    check = (
        "import sys, statelab_client, statelab_client.cli; "
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework', 'annotation', "
        "'inference', 'evaluation', 'config')]; "
        "assert not loaded, loaded; assert 'django' not in sys.modules"
    )
    result = subprocess.run(
        [sys.executable, "-c", check],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ""},
    )
    assert result.returncode == 0, result.stderr
