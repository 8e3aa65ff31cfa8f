"""Signals the inference app sends; other apps subscribe (inference imports none of them)."""
from django.dispatch import Signal

# Sent once a job has ended FINISHED (after its transaction commits), with `job_id`, `project_id`
# and `release_id` (None for a live project). The evaluation app pre-computes the boards then.
job_finished = Signal()
