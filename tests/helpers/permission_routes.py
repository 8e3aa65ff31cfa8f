"""The permission matrix's table (tests/test_permission_matrix.py walks it): one entry per named URL
pattern, saying how to fill its arguments from the seeded world (tests/helpers/permission_world.py),
which methods to try, who is let in and what a person who is let in gets.

Where new routes go: a new page or endpoint gets its entry in `ROUTES` below, next to the routes of
its area (the comments name them); tests/test_permission_matrix.py fails, naming the pattern, until
it has one. The rules and shorthands are in tests/helpers/permission_rules.py. Should this module
near the 500-line limit (tests/test_layering.py), move an area's entries into a module of its own
beside it (tests/helpers/permission_routes_<area>.py) and merge them into `ROUTES` here, in order.
"""

from __future__ import annotations

from annotation.models import Role
from tests.helpers.permission_rules import (
    ANNOTATOR,
    CROWD,
    STRANGER,
    Case,
    Route,
    Try,
    api,
    get,
    member,
    own_task,
    page,
    post,
    public,
    put,
    researcher_anywhere,
    signed_in,
    superuser_only,
    wrong,
)


def slug(w):
    return {"slug": w.mine.slug}


def osc_slug(w):
    return {"slug": w.osc.slug}


NO_ARGS = lambda w: {}  # noqa: E731
INVALID = {"version": ""}

# New routes go in here, under the comment of their area (see this module's docstring).
ROUTES: dict[str, Route] = {
    # Accounts and API documentation
    "login": public(get(200)),
    "logout": public(wrong("GET")),  # POST would end the identity's session (and its token)
    "api-schema": public(get(200)),
    "api-docs": public(get(200)),
    "api-redoc": public(get(200)),
    "healthz": public(get(200)),  # database, Redis and live workers: no sign-in, no secrets (config/health.py)
    # Annotation pages
    "home": page(NO_ARGS, signed_in, get(200)),
    "io-project": page(slug, member(Role.ANNOTATOR), get(200)),
    # Project setup (annotation/views/members.py): creating needs a researcher/admin role somewhere
    # (or staff); the members page is the project's researchers'; an invite link (expired here:
    # 410, nothing joins) is for anyone signed in; amending is the annotator's own (others 404).
    "io-project-new": page(NO_ARGS, researcher_anywhere, get(200), post(400, data={}), wrong("DELETE")),
    "io-members": page(slug, member(Role.RESEARCHER), get(200), post(400, data={}), wrong("DELETE")),
    # The project settings page (disagreement thresholds; the world's project compares quintuplet
    # fields, and none ticked is refused). Its project form is the project admins' (no name: refused).
    "io-project-settings": Route(
        "page",
        (
            Case(slug, member(Role.RESEARCHER), (get(200), post(400, data={}), wrong("DELETE")), "thresholds"),
            Case(slug, member(Role.ADMIN), (post(400, data={"form": "project"}),), "project form"),
        ),
    ),
    # The labelling pass page (annotation/fill_pass.py): a field no pass fills is refused (400).
    "io-fill-pass": page(
        slug, member(Role.RESEARCHER), get(200), post(400, data={"fields": "state_a"}), wrong("DELETE")
    ),
    "io-invite": page(lambda w: {"token": w.invite_token}, signed_in, get(410), post(410)),
    "work-amend": page(
        lambda w: {"slug": w.mine.slug, "annotation_id": w.annotation.pk}, own_task, get(200), wrong("POST")
    ),
    "io-import": page(slug, member(Role.RESEARCHER), get(200), post(400, data={}), wrong("DELETE")),
    "io-import-run": page(lambda w: {"slug": w.mine.slug, "run_id": w.run.pk}, member(Role.RESEARCHER), get(200)),
    "io-releases": page(slug, member(Role.RESEARCHER), get(200), post(400, data=INVALID), wrong("DELETE")),
    "io-release-download": page(lambda w: {"slug": w.mine.slug, "version": "v1"}, member(Role.RESEARCHER), get(200)),
    "work-annotate": page(slug, member(Role.ANNOTATOR), get(200), wrong("POST")),
    "work-review-list": page(slug, member(Role.REVIEWER), get(200), wrong("POST")),
    "work-review-detail": page(
        lambda w: {"slug": w.mine.slug, "item_id": w.annotated.pk}, member(Role.REVIEWER), get(200)
    ),
    "work-agreement": page(slug, member(Role.REVIEWER), get(200), wrong("POST")),
    "io-audit": page(slug, member(Role.RESEARCHER), get(200), get(400, query="since=yesterday"), wrong("POST")),
    # Crowd studies (annotation/views/studies.py): the project's researchers manage them. The public
    # study link is anonymous-accessible BY DESIGN: the crowd platform's id (PROLIFIC_PID, workerId)
    # is the participant's identity; without one (as asked here) it explains itself (200), and a
    # signed-in non-participant is never signed out by it. The finish page belongs to a study's
    # participants (the crowd account of the project's study; it did none of its task and nothing
    # is left to claim, so the page says so, without a code; anyone else 404).
    "io-studies": page(slug, member(Role.RESEARCHER), get(200), post(400, data={}), wrong("DELETE")),
    "io-study": page(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk},
        member(Role.RESEARCHER),
        get(200),
        post(400, data={}),
        wrong("DELETE"),
    ),
    "io-study-csv": page(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk}, member(Role.RESEARCHER), get(200), wrong("POST")
    ),
    "study-entry": Route("public", (Case(lambda w: {"token": w.study.token}, signed_in, (get(200), wrong("POST"))),)),
    "study-finish": page(
        lambda w: {"token": w.study.token}, lambda who: "ok" if who == CROWD else 404, get(200), wrong("POST")
    ),
    "api-studies": api(slug, member(Role.RESEARCHER), get(200), post(400, data={"name": ""}), wrong("DELETE")),
    "api-study": api(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk}, member(Role.RESEARCHER), get(200), wrong("POST")
    ),
    "api-study-close": api(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk}, member(Role.RESEARCHER), post(409), wrong("GET")
    ),
    "api-study-decision": api(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk, "participant_id": w.participant.pk},
        member(Role.RESEARCHER),
        post(400, data={"decision": "maybe"}),
        wrong("GET"),
    ),
    # Annotation API
    "api-me": api(NO_ARGS, signed_in, get(200), wrong("DELETE")),
    "api-projects": api(
        NO_ARGS,
        signed_in,
        get(200),
        Try("POST", frozenset({400}), data={"slug": "x"}, rule=researcher_anywhere),
        wrong("DELETE"),
    ),
    "api-members": api(slug, member(Role.RESEARCHER), get(200), post(400, data={"role": "boss"}), wrong("PUT")),
    "api-members-csv": api(slug, member(Role.RESEARCHER), post(400, multipart=True), wrong("GET")),
    # A role change refused for its data; a removal of someone who is not a member: 404 once let in.
    "api-member": Route(
        "api",
        (
            Case(
                lambda w: {"slug": w.mine.slug, "user_id": w.users[ANNOTATOR].pk},
                member(Role.RESEARCHER),
                (Try("PATCH", frozenset({400}), data={"role": "boss"}), wrong("GET")),
                "member",
            ),
            Case(
                lambda w: {"slug": w.mine.slug, "user_id": w.users[STRANGER].pk},
                member(Role.RESEARCHER),
                (Try("DELETE", frozenset({404}), data={}),),
                "not a member",
            ),
        ),
    ),
    "api-invites": api(
        slug,
        member(Role.RESEARCHER),
        get(200),
        get(400, query="state=gone"),
        post(400, data={"role": "boss"}),
        wrong("DELETE"),
    ),
    # Revoking the world's invite, which expired: 409 once let in, nothing changes.
    "api-invite-revoke": api(
        lambda w: {"slug": w.mine.slug, "invite_id": w.invite.pk}, member(Role.RESEARCHER), post(409), wrong("GET")
    ),
    "api-invite-accept": api(lambda w: {"token": w.invite_token}, signed_in, post(410), wrong("GET")),
    "api-own-annotations": api(slug, member(Role.ANNOTATOR), get(200), wrong("POST")),
    "api-own-annotation": api(lambda w: {"annotation_id": w.annotation.pk}, own_task, get(200), wrong("POST")),
    "api-annotation-amend": api(
        lambda w: {"annotation_id": w.annotation.pk}, own_task, post(400, data={"result": {}}), wrong("GET")
    ),
    "api-project-overview": api(slug, member(Role.ANNOTATOR), get(200), wrong("DELETE")),
    # A box threshold for a quintuplet project: refused (400), nothing changes.
    "api-project-thresholds": api(
        slug, member(Role.RESEARCHER), get(200), Try("PATCH", frozenset({400}), data={"box_iou": 0.4}), wrong("DELETE")
    ),
    "api-fill-pass": api(
        slug, member(Role.RESEARCHER), get(200), post(400, data={"fields": ["state_a"]}), wrong("DELETE")
    ),
    "api-item-import": api(slug, member(Role.RESEARCHER), get(200), post(400, multipart=True), wrong("DELETE")),
    "api-item-import-formats": api(slug, member(Role.RESEARCHER), get(200), wrong("POST")),
    "api-import-run": api(lambda w: {"run_id": w.run.pk}, member(Role.RESEARCHER), get(200), wrong("DELETE")),
    "api-annotation-import": api(slug, member(Role.RESEARCHER), post(400, multipart=True), wrong("GET")),
    "api-releases": api(slug, member(Role.RESEARCHER), get(200), post(400, data=INVALID), wrong("DELETE")),
    "api-release-export": api(
        lambda w: {"slug": w.mine.slug, "version": "v1"},
        member(Role.RESEARCHER),
        get(200),
        get(400, query="fmt=exe"),
        wrong("DELETE"),
    ),
    "api-task-next": api(slug, member(Role.ANNOTATOR), post(400, data={"exclude": "not a list"}), wrong("GET")),
    # The annotator's own task (submitted): drafts and submits refused for their data, renew and
    # skip refused as the task is no longer held.
    "api-task-draft": api(lambda w: {"task_id": w.task.pk}, own_task, put(400, data={"version": -1}), wrong("POST")),
    "api-task-renew": api(lambda w: {"task_id": w.task.pk}, own_task, post(409), wrong("GET")),
    "api-task-submit": api(
        lambda w: {"task_id": w.task.pk}, own_task, post(400, data={"result": {}, "time_spent_ms": -1}), wrong("GET")
    ),
    "api-task-skip": api(lambda w: {"task_id": w.task.pk}, own_task, post(409), wrong("GET")),
    "api-review-queue": api(slug, member(Role.REVIEWER), get(200), get(400, query="limit=x"), wrong("POST")),
    "api-item-review": api(
        lambda w: {"item_id": w.annotated.pk},
        member(Role.REVIEWER),
        get(200),
        post(400, data={"decision": "maybe"}),
        wrong("DELETE"),
    ),
    "api-agreement": api(slug, member(Role.REVIEWER), get(200), wrong("POST")),
    "api-audit": api(slug, member(Role.RESEARCHER), get(200), get(400, query="action=nope"), wrong("POST")),
    "api-audit-export": api(slug, member(Role.RESEARCHER), get(200), get(400, query="fmt=xlsx"), wrong("POST")),
    # Inference pages and API (the job's project decides)
    "inference:job-detail": page(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), get(200)),
    "inference:job-results": page(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), get(200)),
    "inference:job-samples": page(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), get(200)),
    # Launch a job on an endpoint that does not exist: 400, nothing created.
    "api-jobs": api(slug, member(Role.RESEARCHER), post(400, data={"endpoint": "no-such-endpoint"}), wrong("GET")),
    "api-job-progress": api(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), get(200), wrong("POST")),
    # Cancel a finished job: 409 and nothing changes; retry a queued one: nothing to retry.
    "api-job-cancel": api(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), post(409), wrong("GET")),
    "api-job-retry-failed": api(lambda w: {"pk": w.queued_job.pk}, member(Role.RESEARCHER), post(200), wrong("GET")),
    # Evaluation pages and API
    "evaluation:leaderboard": page(slug, member(Role.RESEARCHER), get(200)),
    "evaluation:leaderboard-download": page(
        lambda w: {"slug": w.mine.slug, "fmt": "csv"}, member(Role.RESEARCHER), get(200)
    ),
    "evaluation:correlation": page(osc_slug, member(Role.RESEARCHER, crowd_study_here=False), get(200)),
    "evaluation:correlation-download": page(
        lambda w: {"slug": w.osc.slug, "fmt": "json"}, member(Role.RESEARCHER, crowd_study_here=False), get(200)
    ),
    "api-leaderboard": api(
        slug, member(Role.RESEARCHER), get(200), get(200, query="fmt=csv"), get(400, query="fmt=exe"), wrong("POST")
    ),
    "api-correlation": api(
        osc_slug,
        member(Role.RESEARCHER, crowd_study_here=False),
        get(200),
        get(200, query="fmt=latex"),
        wrong("POST"),
    ),
    # The power page and its API: a bad target is a 400 naming it, for whoever is let in.
    "evaluation:power": page(slug, member(Role.RESEARCHER), get(200), get(400, query="half_width=abc")),
    "api-power": api(
        slug,
        member(Role.RESEARCHER),
        get(200),
        get(200, query="fmt=markdown&half_width=1.5"),
        get(400, query="half_width=0"),
        wrong("POST"),
    ),
    # MLLM judges of a pairwise project: the page says when a project is not one; the API answers
    # 404 naming the protocol, and a 400 for a Likert project the caller cannot compare with.
    "evaluation:judges": page(slug, member(Role.RESEARCHER), get(200), get(400, query="likert=nowhere")),
    "api-judges": api(slug, member(Role.RESEARCHER), get(404), get(400, query="likert=nowhere"), wrong("POST")),
    # Excluding a rater from a board with a rater screen: the matrix's project is of a protocol
    # without one, so whoever is let in gets 404 naming that, before the body is read; nothing changes.
    "api-rater-exclusions": api(slug, member(Role.RESEARCHER), post(404, data={}), wrong("GET")),
    # Media: stored assets for any member of a project using them, the upload area for
    # researchers anywhere, anything else for superusers only.
    "media": Route(
        "page",
        (
            Case(lambda w: {"path": w.asset.file.name}, member(Role.ANNOTATOR), (get(200),), "asset"),
            Case(lambda w: {"path": "incoming/upload.png"}, researcher_anywhere, (get(200),), "upload area"),
            Case(lambda w: {"path": "exports/job-1.json"}, superuser_only, (get(200),), "other file"),
        ),
    ),
}
