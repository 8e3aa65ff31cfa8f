"""Playwright helpers shared by the browser tests."""

from __future__ import annotations

import re

# The OSCBench rating criteria in the order the rating form lists them.
OSC_CRITERIA = ("subject", "object", "action", "osc_accuracy", "osc_consistency", "scene", "realism", "aesthetics")

# An init script: reports each Content-Security-Policy violation into window.cspViolations before any
# page script runs.
RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.cspViolations.push(
    `${e.violatedDirective} blocked ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`
  );
});
"""


def wait_import_done(page, timeout: float = 90_000) -> str:
    """The import run's page refreshes itself until the worker is done; return the final status."""
    page.wait_for_selector(
        "#import-run[data-status=finished], #import-run[data-status=refused], #import-run[data-status=failed]",
        timeout=timeout,
    )
    return page.get_attribute("#import-run", "data-status")


def option_texts(page, select: str) -> list[str]:
    """A select's option labels, without the empty "---------" choice."""
    return [t.strip() for t in page.locator(f"{select} option").all_inner_texts() if not re.fullmatch(r"-+", t.strip())]
