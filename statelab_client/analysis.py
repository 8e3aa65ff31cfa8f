"""The analysis half of the client: leaderboards, the human-judge correlation and the power plan,
as JSON data or as the server's tables (text). HTTP only, like the rest of the client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import httpx

LeaderboardFormat = Literal["json", "csv", "latex", "markdown"]
CorrelationFormat = Literal["json", "csv", "latex"]
PowerFormat = Literal["json", "markdown"]


class Analysis:
    """Mixed into StateLabClient, whose ``_request`` sends the calls."""

    _request: Callable[..., httpx.Response]

    def leaderboard(
        self,
        slug: str,
        *,
        release: str | None = None,
        judge: str | None = None,
        fmt: LeaderboardFormat = "json",
        details: bool = False,
        rank_by: str | None = None,
        baseline: str | None = None,
    ) -> Any:
        """The board as JSON data (fmt="json"), else the table as text (csv, latex, markdown).
        `rank_by` picks another ranking where the protocol has one (video rating: "criteria_mean");
        `baseline` (a row's model, json and markdown) adds every other row's paired comparison with it."""
        params = {
            "release": release or "",
            "judge": judge or "",
            "fmt": fmt,
            **({"details": "1"} if details else {}),
            **({"rank_by": rank_by} if rank_by else {}),
            **({"baseline": baseline} if baseline else {}),
        }
        return self._analysis(f"/api/projects/{slug}/leaderboard/", params, fmt)

    def correlation(
        self,
        slug: str,
        *,
        release: str | None = None,
        fmt: CorrelationFormat = "json",
        details: bool = False,
    ) -> Any:
        """Human-judge correlation (video rating projects): JSON data, or csv / latex text."""
        params = {"release": release or "", "fmt": fmt, **({"details": "1"} if details else {})}
        return self._analysis(f"/api/projects/{slug}/correlation/", params, fmt)

    def power(
        self,
        slug: str,
        *,
        release: str | None = None,
        judge: str | None = None,
        half_width: float | None = None,
        difference: float | None = None,
        metric: str | None = None,
        baseline: str | None = None,
        fmt: PowerFormat = "json",
    ) -> Any:
        """Items (and raters; with `baseline`, paired units) needed for a 95 % interval of half-width
        `half_width` points, from the project's board as a pilot: JSON data, or markdown text."""
        params = {
            "release": release or "",
            "judge": judge or "",
            "fmt": fmt,
            **({"half_width": str(half_width)} if half_width is not None else {}),
            **({"difference": str(difference)} if difference is not None else {}),
            **({"metric": metric} if metric else {}),
            **({"baseline": baseline} if baseline else {}),
        }
        return self._analysis(f"/api/projects/{slug}/power/", params, fmt)

    def _analysis(self, path: str, params: dict[str, str], fmt: str) -> Any:
        response = self._request("GET", path, params=params)
        return response.json() if fmt == "json" else response.text
