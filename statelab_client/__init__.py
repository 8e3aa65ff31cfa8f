"""StateLab's Python client: a typed httpx client over the REST API (`StateLabClient`) and the
`statelab` command (`statelab_client.cli`). HTTP only: it imports neither Django nor StateLab."""

from .client import (
    ApiError,
    ConnectionFailed,
    ImportRun,
    JobProgress,
    Me,
    Project,
    Release,
    StateLabClient,
    StateLabError,
)

__all__ = [
    "ApiError",
    "ConnectionFailed",
    "ImportRun",
    "JobProgress",
    "Me",
    "Project",
    "Release",
    "StateLabClient",
    "StateLabError",
]
