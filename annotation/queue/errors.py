"""What a queue service raises when a request cannot be carried out; the API maps each to a status
in one place (annotation.apis.work.WorkApi)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..models import Annotation


class TaskConflict(Exception):
    """The request lost a race or is stale (HTTP 409); the message says what to do.

    `extra` goes into the response body next to the message (e.g. the newer draft version).
    """

    def __init__(self, message: str, **extra):
        super().__init__(message)
        self.extra = extra


class TaskNotFound(Exception):
    """No such task for this user (HTTP 404; other people's tasks are not revealed)."""


class AlreadySubmitted(TaskConflict):
    """This annotator already submitted the item with a different answer (HTTP 409); the stored
    annotation goes into the response body so the page can show what was kept."""

    def __init__(self, annotation: Annotation):
        super().__init__(
            "This task was already submitted with a different answer (from another tab or window, or "
            "an earlier submit). The first answer is kept; yours was not saved."
        )
        self.annotation = annotation
