"""One machinery for background work that survives crashes, shared by every app.

Each unit of background work (a job's start and chunks, an export, a board warm-up, an import) has
a PostgreSQL row: a concrete model of `models.TrackedRun` (inference's BackgroundRun, annotation's
ImportRun), with one set of states (`models.RunStatus`). A worker takes the row with one atomic
UPDATE (`claim.run_claim`), refreshes its heartbeat from a thread while it works
(`heartbeat.RowHeartbeat`) and ends it through the same claim (`claim.run_finish`, `run_fail`), so a
late duplicate delivery finds nothing to claim. Celery beat's watchdog (`watchdog.runs_watch_all`)
runs each table's pass named in settings.STATELAB_RUN_WATCHERS; every pass is `watchdog.lapsed_runs_watch`:
a run whose heartbeat lapsed is re-queued, and failed with the reason after
STATELAB_RUN_MAX_ATTEMPTS claims. `tracked.TrackedTask` is the Celery task base that does all this
for runs recorded in settings.STATELAB_TRACKED_RUN_MODEL.

This package imports none of the apps: what a run means to its owner (a job's chunk, an import's
staged file) is the owner's, passed in as callbacks or named in settings.
"""
