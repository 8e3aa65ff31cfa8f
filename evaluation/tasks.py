"""Celery tasks of the evaluation app (`default` queue): ids in, call a function, nothing else."""

from celery import shared_task

from background.tracked import TrackedTask

from . import board_cache


# A tracked run (background.tracked): sent with its run row's id when a job finishes.
@shared_task(name="evaluation.tasks.warm_boards", base=TrackedTask)
def warm_boards(project_id: int, release_id: int | None = None) -> list[str]:
    """Pre-compute and cache a project's boards after a job finished (see board_cache.warm); settings
    name this Celery task in STATELAB_JOB_FINISHED_TASKS, so inference sends it by name."""
    return board_cache.warm(project_id, release_id)
