"""Crowd studies over the API (a project's researchers and admins): list and open studies, read
a study with its participants table, close it, approve or reject a participant.

Errors: 400 {"detail", "errors": {field: message}} for bad input, 404 for a project, study or
participant the caller may not see, 403 for a role too low, 409 {"detail"} for a change the
study's state refuses (closing a closed study, rejecting twice, approving a rejected participant).
"""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from ..models import Role, Study, StudyParticipant
from ..permissions import get_project_for
from ..project_setup import SetupInvalid
from ..studies.participants import participant_approve, participant_reject
from ..studies.setup import StudyRefused, study_close, study_create
from ..studies.table import participant_rows, studies_of, study_public_path, study_totals
from .members import ErrorOut, bad_request, parse

REFUSALS = {400: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut}


def study_out(request, study: Study) -> dict:
    return {
        "id": study.pk,
        "name": study.name,
        "platform": study.platform,
        "is_open": study.is_open,
        "link": request.build_absolute_uri(study_public_path(study)),
        "max_participants": study.max_participants,
        "tasks_per_participant": study.tasks_per_participant,
        "completion_code": study.completion_code,
        "return_url": study.return_url,
        "redirect_on_finish": study.redirect_on_finish,
        "time_limit_minutes": study.time_limit_minutes,
        "gold_pass_threshold": study.gold_pass_threshold,
        "hourly_rate": str(study.hourly_rate),
        "currency": study.currency,
        "created_at": study.created_at,
        "closed_at": study.closed_at,
    }


def _row_out(row: dict) -> dict:
    return {**row, "pay_estimate": str(row["pay_estimate"])}


class StudyApi(APIView):
    def handle_exception(self, exc):
        if isinstance(exc, SetupInvalid):
            return bad_request(exc.errors)
        if isinstance(exc, StudyRefused):
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        if isinstance(exc, StudyParticipant.DoesNotExist):
            exc = Http404("No such participant.")
        return super().handle_exception(exc)

    def study(self, request, slug: str, study_id: int) -> Study:
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        return get_object_or_404(Study.objects.select_related("project"), pk=study_id, project=project)


class StudyListApi(StudyApi):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyInput"

        name = serializers.CharField(max_length=200)
        platform = serializers.ChoiceField(choices=["prolific", "mturk"], default="prolific")
        max_participants = serializers.IntegerField()
        tasks_per_participant = serializers.IntegerField()
        completion_code = serializers.CharField(max_length=100)
        return_url = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")
        redirect_on_finish = serializers.BooleanField(required=False, default=False)
        time_limit_minutes = serializers.IntegerField(required=False, allow_null=True, default=None)
        gold_pass_threshold = serializers.FloatField(required=False, default=0.0)
        hourly_rate = serializers.DecimalField(max_digits=8, decimal_places=2, required=False, default="0")
        currency = serializers.CharField(max_length=8, required=False, default="GBP")

    @extend_schema(
        responses={200: serializers.ListSerializer(child=serializers.DictField()), **REFUSALS},
        summary="The project's crowd studies",
    )
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        return Response(
            [{**study_out(request, s), "participants": s.n_participants} for s in studies_of(project=project)]
        )

    @extend_schema(
        request=InputSerializer,
        responses={201: OpenApiTypes.OBJECT, **REFUSALS},
        summary="Open a crowd study (its public link comes back as `link`)",
    )
    def post(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = parse(self.InputSerializer, request.data)
        study = study_create(project=project, actor=request.user, **data)
        return Response(study_out(request, study), status=status.HTTP_201_CREATED)


class StudyDetailApi(StudyApi):
    @extend_schema(
        operation_id="projects_study_detail",
        responses={200: OpenApiTypes.OBJECT, **REFUSALS},
        summary="A study with its participants table (active time, tasks, gold accuracy, flagged, pay)",
    )
    def get(self, request, slug: str, study_id: int):
        study = self.study(request, slug, study_id)
        rows = participant_rows(study=study)
        totals = study_totals(rows)
        return Response(
            {
                **study_out(request, study),
                "participants": [_row_out(r) for r in rows],
                "totals": {**totals, "pay_estimate": str(totals["pay_estimate"])},
            }
        )


class StudyCloseApi(StudyApi):
    @extend_schema(
        request=None,
        responses={200: OpenApiTypes.OBJECT, **REFUSALS},
        summary="Close a study: nobody new joins (409 when closed already)",
    )
    def post(self, request, slug: str, study_id: int):
        study = study_close(study=self.study(request, slug, study_id), actor=request.user)
        return Response(study_out(request, study))


class ParticipantDecisionApi(StudyApi):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "ParticipantDecisionInput"

        decision = serializers.ChoiceField(choices=["approve", "reject"])
        note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")

    @extend_schema(
        request=InputSerializer,
        responses={200: OpenApiTypes.OBJECT, **REFUSALS},
        summary="Approve or reject a participant; a rejection takes their annotations out of the analysis, "
        "gives their items back to the queue and sends back to review the verified items whose "
        "decision rested on them (`items_back_to_review`); items frozen in a release keep their "
        "decision and are listed in `released_items_kept`",
    )
    def post(self, request, slug: str, study_id: int, participant_id: int):
        study = self.study(request, slug, study_id)
        data = parse(self.InputSerializer, request.data)
        if data["decision"] == "approve":
            participant = participant_approve(
                study=study, participant_id=participant_id, actor=request.user, note=data["note"]
            )
            return Response({"participant": participant.external_id, "status": participant.status})
        outcome = participant_reject(study=study, participant_id=participant_id, actor=request.user, note=data["note"])
        return Response({"status": "rejected", **outcome})
