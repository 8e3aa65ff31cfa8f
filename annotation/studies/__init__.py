"""Crowd-rater studies: a public link with quotas, a completion code and return URL,
password-less participants bound to their platform id, gold-based flags, approve / reject.

models.py      the studies' tables (Study, CrowdAccount, StudyParticipant, ExcludedAnnotation,
               ItemReopening), re-exported by annotation/models.py, where Django loads them
setup.py       opening and closing studies, and checking their fields
participants.py joining, finishing and deciding on participants
reopen.py      the verified items a rejection sends back to review
table.py       the participants table, its totals and CSV

The per-participant task quota is enforced in the claim path (annotation/queue/quota.py).

This file imports none of them: annotation/models.py imports studies/models.py while it is being
loaded, and the other modules import annotation/models.py, so callers import the module that
holds what they use (`from annotation.studies.setup import study_create`).
"""
