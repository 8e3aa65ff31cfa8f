"""Crowd-study pages. Researchers: the project's studies (open one), a study's participants table
(approve / reject, close the study, CSV). Participants: the public study link /study/<token>/,
open to anyone by design (it signs the platform's id in to its password-less account and sends
it to the annotate page), and the finish page with the completion code."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from ..models import Role, Study
from ..permissions import get_project_for
from ..project_setup import SetupInvalid, project_setting
from ..studies.participants import (
    PLATFORM_PARAMS,
    PlatformIdInvalid,
    StudyUnavailable,
    completion_url,
    participant_approve,
    participant_finish,
    participant_join,
    participant_of,
    participant_reject,
    platform_ids,
)
from ..studies.setup import STUDY_FIELDS, StudyRefused, study_close, study_create
from ..studies.table import participant_rows, participants_csv, studies_of, study_public_path, study_totals

# Crowd accounts have no password: the session is made by the study link, not by a login form.
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
DEFAULTS = {
    "platform": "prolific",
    "max_participants": "30",
    "tasks_per_participant": "20",
    "gold_pass_threshold": "0.8",
    "hourly_rate": "9.00",
    "currency": "GBP",
    "return_url": "https://app.prolific.com/submissions/complete?cc={code}",
}


@login_required
@require_http_methods(["GET", "POST"])
def project_studies(request, slug: str):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    values, errors = dict(DEFAULTS), {}
    if request.method == "POST":
        values = {name: request.POST.get(name, "") for name in STUDY_FIELDS}
        try:
            study = study_create(project=project, actor=request.user, **values)
        except SetupInvalid as exc:
            errors = exc.errors
        else:
            messages.success(request, f"Study \u201c{study.name}\u201d opened. Give its link to the platform.")
            return redirect("io-study", slug=project.slug, study_id=study.pk)
    studies = [(s, request.build_absolute_uri(study_public_path(s))) for s in studies_of(project=project)]
    return render(
        request,
        "annotation/studies/list.html",
        {
            "project": project,
            "studies": studies,
            "values": values,
            "errors": errors,
            "gold_items": project.items.filter(is_gold=True).count(),
            "gold_share": project_setting(project.settings, "gold_share", 0, project=project.slug),
        },
        status=400 if errors else 200,
    )


def _rejected_messages(request, outcome: dict) -> None:
    messages.success(
        request,
        f"Rejected: {outcome['annotations_excluded']} annotation(s) left the analysis, "
        f"{outcome['items_reopened']} item(s) went back to the queue, "
        f"{outcome['items_back_to_review']} verified item(s) went back to review.",
    )
    frozen = outcome["released_items_kept"]
    if frozen:
        listed = "; ".join(f"{r['external_id']} ({', '.join(r['releases'])})" for r in frozen)
        messages.warning(
            request,
            f"{len(frozen)} verified item(s) rested on this participant's annotations but are "
            f"frozen in a release, which cannot change; they keep their decision: {listed}.",
        )


def _study_post(request, study: Study) -> tuple[int, dict]:
    action = request.POST.get("action", "")
    raw = request.POST.get("participant", "")
    participant_id = int(raw) if raw.isdigit() and len(raw) <= 18 else None
    note = request.POST.get("note", "")
    try:
        if action == "close":
            study_close(study=study, actor=request.user)
            messages.success(request, "Study closed: nobody new can join; participants who joined may finish.")
        elif action in ("approve", "reject") and participant_id is not None:
            if action == "approve":
                p = participant_approve(study=study, participant_id=participant_id, actor=request.user, note=note)
                messages.success(request, f"{p.external_id}: approved.")
            else:
                outcome = participant_reject(study=study, participant_id=participant_id, actor=request.user, note=note)
                _rejected_messages(request, outcome)
        else:
            return 400, {"errors": {"action": "One of close, approve, reject (with a participant)."}}
    except StudyRefused as exc:
        return 409, {"errors": {"refused": str(exc)}}
    except study.participants.model.DoesNotExist:
        raise Http404("No such participant.") from None
    return 302, {}


@login_required
@require_http_methods(["GET", "POST"])
def study_detail(request, slug: str, study_id: int):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    study = get_object_or_404(Study.objects.select_related("project"), pk=study_id, project=project)
    status, extra = 200, {}
    if request.method == "POST":
        status, extra = _study_post(request, study)
        if status == 302:
            return redirect("io-study", slug=project.slug, study_id=study.pk)
        study.refresh_from_db()
    rows = participant_rows(study=study)
    return render(
        request,
        "annotation/studies/detail.html",
        {
            "project": project,
            "study": study,
            "rows": rows,
            "totals": study_totals(rows),
            "link": request.build_absolute_uri(study_public_path(study)),
            "params": PLATFORM_PARAMS[study.platform],
            "errors": {},
            **extra,
        },
        status=status,
    )


@login_required
@require_GET
def study_csv(request, slug: str, study_id: int):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    study = get_object_or_404(Study.objects.select_related("project"), pk=study_id, project=project)
    response = HttpResponse(participants_csv(study=study), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-study-{study.pk}-participants.csv"'
    return response


@require_GET
def study_entry(request, token: str):
    """The public link. Anonymous by design: the platform's id is the participant's identity."""
    study = Study.objects.select_related("project").filter(token=token).first()
    if study is None:
        return render(request, "annotation/studies/entry.html", {"state": "unknown"}, status=404)
    context = {"study": study, "param": PLATFORM_PARAMS[study.platform][0]}
    try:
        ids = platform_ids(study, request.GET)
    except PlatformIdInvalid as exc:
        return render(
            request, "annotation/studies/entry.html", {**context, "state": "invalid", "why": str(exc)}, status=400
        )
    if ids is None or ids.preview:
        return render(request, "annotation/studies/entry.html", {**context, "state": "preview" if ids else "no-id"})
    user = request.user
    if user.is_authenticated and not hasattr(user, "crowd_account"):
        # A researcher trying the link: never swap their session for a participant's.
        return render(request, "annotation/studies/entry.html", {**context, "state": "signed-in"})
    try:
        participant, _joined = participant_join(study=study, ids=ids)
    except StudyUnavailable as exc:
        return render(request, "annotation/studies/entry.html", {**context, "state": exc.reason})
    if not (user.is_authenticated and user.pk == participant.user_id):
        login(request, participant.user, backend=MODEL_BACKEND)
    if participant.finished_at or participant.status == "rejected":
        return redirect("study-finish", token=study.token)
    return redirect("work-annotate", slug=study.project.slug)


@login_required
@require_GET
def study_finish(request, token: str):
    """Where a participant's page goes when it has no task left: the code (or the return URL)."""
    study = get_object_or_404(Study.objects.select_related("project"), token=token)
    participant = participant_of(study=study, user=request.user)
    if participant is None:
        raise Http404("No such study participation.")
    state = participant_finish(participant=participant)
    if state.state == "working":
        return redirect("work-annotate", slug=study.project.slug)
    back = completion_url(study) if state.state == "finished" else ""
    if back and study.redirect_on_finish:
        return redirect(back)
    return render(request, "annotation/studies/finish.html", {"study": study, "state": state, "back": back})
