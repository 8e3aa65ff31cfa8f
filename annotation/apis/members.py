"""A project's members (researchers and admins): list and add, change or remove a role, a CSV of
members, invite links (list, make, revoke); and joining through an invite link (any signed-in user
holding one).

Errors: 400 {"detail", "errors": {field: message}} for bad input, 404 for a project, member or
invite the caller may not see, 403 for a role too low, 409 {"detail"} for a change the rules refuse
(a role above the caller's, the last researcher or admin, an invite that is no longer open), 410
{"detail"} for a used, revoked or expired invite.

Accounts are named by username only and no e-mail is returned; an unknown username and a crowd
account of another project's study get the same 400 and the same words (annotation/members.py).
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from ..members import (
    INVITE_STATES,
    InviteGone,
    MemberRefused,
    invite_accept,
    invite_create,
    invite_data,
    invite_revoke,
    invites_of,
    member_add,
    member_remove,
    member_set_role,
    members_import_csv,
    members_of,
)
from ..models import Membership, ProjectInvite, Protocol, Role
from ..permissions import get_project_for
from ..project_setup import SetupInvalid

MEMBER_FIELDS = {
    "user_id": serializers.IntegerField(),
    "username": serializers.CharField(),
    "role": serializers.ChoiceField(choices=Role.choices),
}
MemberOut = inline_serializer("Member", MEMBER_FIELDS)
MembersOut = inline_serializer("MemberList", MEMBER_FIELDS, many=True)
INVITE_FIELDS = {
    "id": serializers.IntegerField(),
    "role": serializers.ChoiceField(choices=Role.choices),
    "state": serializers.ChoiceField(choices=INVITE_STATES),
    "expires_at": serializers.DateTimeField(),
    "created_by": serializers.CharField(),
    "created_at": serializers.DateTimeField(),
    "used_by": serializers.CharField(help_text="empty while unused"),
    "used_at": serializers.DateTimeField(allow_null=True),
    "revoked_by": serializers.CharField(help_text="empty unless revoked"),
    "revoked_at": serializers.DateTimeField(allow_null=True),
}
InvitesOut = inline_serializer("ProjectInvite", many=True, fields=INVITE_FIELDS)
InviteOut = inline_serializer("ProjectInviteRow", fields=INVITE_FIELDS)
ErrorOut = inline_serializer(
    "MemberError",
    {"detail": serializers.CharField(), "errors": serializers.DictField(child=serializers.CharField(), required=False)},
)
REFUSALS = {400: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut}


def bad_request(errors: dict[str, str]) -> Response:
    return Response(
        {"detail": f"Please fix: {', '.join(errors)}.", "errors": errors}, status=status.HTTP_400_BAD_REQUEST
    )


def parse(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise SetupInvalid(
            {k: " ".join(str(m) for m in (v if isinstance(v, list) else [v])) for k, v in serializer.errors.items()}
        )
    return serializer.validated_data


class SetupApi(APIView):
    """Maps the services' refusals to HTTP statuses in one place."""

    def handle_exception(self, exc):
        if isinstance(exc, SetupInvalid):
            return bad_request(exc.errors)
        if isinstance(exc, MemberRefused):
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        if isinstance(exc, InviteGone):
            return Response({"detail": str(exc)}, status=status.HTTP_410_GONE)
        if isinstance(exc, Membership.DoesNotExist):
            exc = Http404("No such member.")
        if isinstance(exc, ProjectInvite.DoesNotExist):
            exc = Http404("No such invite link.")
        return super().handle_exception(exc)


class RoleIn(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)


class MemberListApi(SetupApi):
    class InputSerializer(RoleIn):
        class Meta:
            ref_name = "MemberAddInput"

        username = serializers.CharField(max_length=150, required=False)
        # The older name of the same field, still read (as a username: the API takes no e-mail).
        username_or_email = serializers.CharField(max_length=254, required=False, write_only=True)

        def validate(self, attrs):
            name = attrs.get("username") or attrs.get("username_or_email")
            if not name:
                raise serializers.ValidationError({"username": "The account's username."})
            return {"username": name, "role": attrs["role"]}

    @extend_schema(responses={200: MembersOut, **REFUSALS}, summary="The project's members (researchers+)")
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        return Response(members_of(project=project))

    @extend_schema(
        request=InputSerializer,
        summary="Add a member by username (or set their role)",
        responses={
            201: inline_serializer("MemberAdded", {"member": MemberOut, "outcome": serializers.CharField()}),
            **REFUSALS,
        },
    )
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = parse(self.InputSerializer, request.data)
        membership, outcome = member_add(
            project=project,
            actor=request.user,
            username_or_email=data["username"],
            role=data["role"],
            by_email=False,
            field="username",
        )
        member = {"user_id": membership.user_id, "username": membership.user.get_username(), "role": membership.role}
        return Response({"member": member, "outcome": outcome}, status=status.HTTP_201_CREATED)


class MemberApi(SetupApi):
    @extend_schema(request=RoleIn, responses={200: MemberOut, **REFUSALS}, summary="Change a member's role")
    def patch(self, request, slug, user_id):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = parse(RoleIn, request.data)
        membership, _ = member_set_role(project=project, actor=request.user, user_id=user_id, role=data["role"])
        return Response(
            {"user_id": membership.user_id, "username": membership.user.get_username(), "role": membership.role}
        )

    @extend_schema(responses={204: OpenApiResponse(description="Removed."), **REFUSALS}, summary="Remove a member")
    def delete(self, request, slug, user_id):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        member_remove(project=project, actor=request.user, user_id=user_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemberCsvApi(SetupApi):
    """POST a CSV (multipart field `file`) of `username,role` lines (usernames only; the header may
    still name the first column username_or_email)."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": inline_serializer("MemberCsvInput", {"file": serializers.FileField()})},
        responses={
            200: inline_serializer(
                "MemberCsvReport",
                {
                    "lines": serializers.ListField(child=serializers.DictField()),
                    "counts": serializers.DictField(child=serializers.IntegerField()),
                },
            ),
            **REFUSALS,
        },
        summary="Add or change members from a CSV: a report per line; a malformed file writes nothing",
    )
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        uploaded = request.FILES.get("file")
        if uploaded is None:
            raise SetupInvalid({"file": "Choose a .csv file of username_or_email,role lines."})
        report = members_import_csv(project=project, actor=request.user, data=uploaded.read(), by_email=False)
        # The API's words: the first column is a username (the page still calls it username_or_email).
        lines = [{("username" if k == "username_or_email" else k): v for k, v in row.items()} for row in report.lines]
        return Response({"lines": lines, "counts": report.counts})


class InviteListApi(SetupApi):
    class InputSerializer(RoleIn):
        class Meta:
            ref_name = "InviteInput"

        hours = serializers.IntegerField(min_value=1, max_value=24 * 90, default=72)

    @extend_schema(
        responses={200: InvitesOut, **REFUSALS},
        summary="The project's invite links (no tokens)",
        parameters=[
            OpenApiParameter(
                "state", str, enum=list(INVITE_STATES), description="only the links in this state (open: usable now)"
            )
        ],
    )
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        return Response(invites_of(project=project, state=request.query_params.get("state", "")))

    @extend_schema(
        request=InputSerializer,
        summary="Make a single-use invite link (its URL is shown only now)",
        responses={
            201: inline_serializer(
                "InviteMade",
                {
                    "id": serializers.IntegerField(),
                    "role": serializers.CharField(),
                    "expires_at": serializers.DateTimeField(),
                    "url": serializers.URLField(),
                },
            ),
            **REFUSALS,
        },
    )
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = parse(self.InputSerializer, request.data)
        invite, token = invite_create(project=project, actor=request.user, role=data["role"], hours=data["hours"])
        return Response(
            {
                "id": invite.pk,
                "role": invite.role,
                "expires_at": invite.expires_at,
                "url": request.build_absolute_uri(f"/invites/{token}/"),
            },
            status=status.HTTP_201_CREATED,
        )


class InviteRevokeApi(SetupApi):
    @extend_schema(
        request=None,
        responses={200: InviteOut, **REFUSALS},
        summary="Revoke an open invite link: it answers 410 from now on (409 when used, revoked or expired)",
    )
    def post(self, request, slug, invite_id):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        invite = invite_revoke(project=project, actor=request.user, invite_id=invite_id)
        return Response(invite_data(invite))


class InviteAcceptApi(SetupApi):
    @extend_schema(
        request=None,
        summary="Join a project through an invite link's token",
        responses={
            200: inline_serializer(
                "InviteAccepted",
                {
                    "project": serializers.CharField(),
                    "role": serializers.CharField(),
                    "outcome": serializers.CharField(help_text="added, or already (a member before)"),
                },
            ),
            410: ErrorOut,
        },
    )
    def post(self, request, token):
        membership, outcome = invite_accept(token=token, user=request.user)
        return Response({"project": membership.project.slug, "role": membership.role, "outcome": outcome})


class ProjectCreateIn(serializers.Serializer):
    """POST /api/projects/ (annotation/apis/projects.py): ranges are checked again by project_create."""

    name = serializers.CharField(max_length=200)
    slug = serializers.CharField(max_length=80)
    # Choices filled in per request (__init__): the registry as the setting names it now.
    protocol = serializers.ChoiceField(choices=())
    annotations_per_item = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=50,
        help_text="Empty: the protocol's default (3 for video rating, else 1).",
    )
    gold_share = serializers.FloatField(required=False, default=0, min_value=0, max_value=1)
    suggestions = serializers.BooleanField(required=False, default=True, help_text="Quintuplet and QA forms only.")
    lease_seconds = serializers.IntegerField(required=False, default=600, min_value=60, max_value=86400)
    rubric = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=5000,
        help_text="Video rating only: the rubric shown to raters.",
    )
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["protocol"].choices = Protocol.values
