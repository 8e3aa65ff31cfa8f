"""Celery tasks of the evaluation app (`default` queue): ids in, call a function, nothing else."""
from celery import shared_task


@shared_task(name="evaluation.tasks.warm_boards")
def warm_boards(project_id: int, release_id: int | None = None) -> list[str]:
    """Pre-compute and cache a project's boards after a job finished (see boards.warm)."""
    from . import boards

    return boards.warm(project_id, release_id)
