"""The one vocabulary of background runs: their states and the fields every tracked run carries.

`TrackedRun` is abstract: each app keeps its own table of runs (what the work is, whom it belongs
to) and inherits the claim, heartbeat and recovery fields from here, so one claim, one heartbeat
and one watchdog (this package) serve them all.
"""

from django.db import models


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    # Work that checks its input first (an import) refuses bad input whole: nothing was written.
    REFUSED = "refused", "Refused (nothing written)"
    FAILED = "failed", "Failed"


# A run in one of these has ended: no claim takes it again and the watchdog leaves it alone.
ENDED = (RunStatus.FINISHED, RunStatus.REFUSED, RunStatus.FAILED)


class TrackedRun(models.Model):
    """A row per unit of background work: queued, claimed by a worker (``attempts`` counts the
    claims, ``worker`` names the latest), kept alive by its heartbeat, then ended. ``reason`` says
    why it failed or why the watchdog re-queued it."""

    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)  # claims so far
    worker = models.CharField(max_length=200, blank=True)  # hostname of the latest claim
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def done(self) -> bool:
        return self.status in ENDED
