"""JSON API of annotation work: the task queue (annotators), review (reviewers), agreement.

Thin views: parse, check the role through annotation.permissions, call one service or selector.
Errors: 400 {"detail", "errors": {field: message}}, 404 for anything the user may not see,
403 for a role too low, 409 {"detail"} for a stale or lost write.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from ..models import Item, ItemStatus, Role
from ..permissions import get_project_for, require_role
from ..queue import (
    AlreadySubmitted,
    TaskConflict,
    TaskNotFound,
    annotation_submit,
    queue_claim_for,
    queue_claim_next,
    task_renew,
    task_save_draft,
    task_save_draft_plain,
    task_skip,
)
from ..queue.quota import queue_done_headers
from ..results import ResultInvalid
from ..selectors import (
    annotation_view,
    item_review_detail,
    review_queue_for,
    task_view,
)
from ..selectors_agreement import project_agreement
from ..services import review_decide


def _bad_request(errors: dict[str, str]) -> Response:
    names = ", ".join(errors)
    return Response({"detail": f"Please fix: {names}.", "errors": errors}, status=status.HTTP_400_BAD_REQUEST)


# Task and item ids are bigint columns; offsets go to SQL as bigints too.
BIGINT_MAX = 2**63 - 1


def _query_int(request, name: str, default: int) -> int:
    """A whole-number query parameter within the bigint range (400 naming it otherwise)."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw.strip()) if len(raw) <= 20 else None
    except ValueError:
        value = None
    if value is None or abs(value) > BIGINT_MAX // 2:
        raise ResultInvalid({name: f"{name} must be a whole number below {BIGINT_MAX // 2}, not {raw[:40]!r}."})
    return value


def _parse(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        errors = {
            k: " ".join(str(m) for m in (v if isinstance(v, list) else [v])) for k, v in serializer.errors.items()
        }
        raise ResultInvalid(errors)
    return serializer.validated_data


# The annotation loop's bodies, checked without DRF's serializers where they are plainly what
# the serializer accepts (the serializer is built and its fields copied on every request). Each
# check answers None for anything else, and the view then runs the serializer, which answers
# exactly as always: these accept a subset of what it accepts and return what it would.
def _body(request) -> tuple[object, Exception | None]:
    """(request.data, None), or (None, the exception reading it raised): a view raises it where it
    reads the body (after the role check), as reading request.data there would have."""
    try:
        return request.data, None
    except Exception as exc:  # a parse error, an unsupported type, a body too big: raised later
        return None, exc


def _whole(value, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high  # not bool, not "3", not 3.0: the serializer's


def _plain_exclude(data) -> tuple[int, ...] | None:
    """TaskNextApi.InputSerializer's `exclude` from a plain JSON body."""
    if type(data) is not dict:
        return None
    if "exclude" not in data:
        return ()
    exclude = data["exclude"]
    if type(exclude) is not list or len(exclude) > 10 or not all(_whole(x, 1, BIGINT_MAX) for x in exclude):
        return None
    return tuple(exclude)


def _plain_draft(data) -> tuple[dict, int] | None:
    """TaskDraftApi.InputSerializer's (draft, version) from a plain JSON body."""
    if type(data) is not dict or type(data.get("draft")) is not dict or not _whole(data.get("version"), 0, 2**31 - 1):
        return None
    return data["draft"], data["version"]


def _plain_result(data, key: str | None) -> dict | None:
    """TaskSubmitApi.InputSerializer's `result` from a plain JSON body (None for a JSON null too:
    the serializer refuses that), with an Idempotency-Key the view accepts."""
    if type(data) is not dict or data.get("result") is None or (key is not None and len(key) > 200):
        return None
    if "time_spent_ms" in data and not _whole(data["time_spent_ms"], 0, 2_000_000_000):
        return None
    return data["result"]


TaskOut = inline_serializer(
    "WorkTask",
    {
        "task": serializers.IntegerField(),
        "item": serializers.JSONField(
            help_text="Annotator-safe payload: media URLs, workflow, protocol and what the "
            "form needs (criteria and rubric, question and options, candidates, "
            "machine-made suggestions). Never ground truth or metadata."
        ),
        "draft": serializers.JSONField(),
        "version": serializers.IntegerField(help_text="Draft version to send with the next PUT .../draft/."),
        "lease_expires": serializers.DateTimeField(),
    },
)
AnnotationOut = inline_serializer(
    "WorkAnnotation",
    {
        "id": serializers.IntegerField(),
        "task": serializers.IntegerField(),
        "item": serializers.IntegerField(),
        "result": serializers.JSONField(),
        "time_spent_ms": serializers.IntegerField(),
        "created_at": serializers.DateTimeField(),
        "warnings": serializers.DictField(child=serializers.CharField(), help_text="Format hints that did not block."),
    },
)
ErrorOut = inline_serializer(
    "WorkError",
    {"detail": serializers.CharField(), "errors": serializers.DictField(child=serializers.CharField(), required=False)},
)
IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Repeat a submit safely: the same key with the same result returns the same "
    "annotation (200); a different result gets 409. Keys are per annotator.",
)


class WorkApi(APIView):
    """Maps service outcomes to HTTP statuses in one place."""

    def handle_exception(self, exc):
        if isinstance(exc, ResultInvalid):
            return _bad_request(exc.errors)
        if isinstance(exc, AlreadySubmitted):
            return Response(
                {"detail": str(exc), "annotation": annotation_view(annotation=exc.annotation)},
                status=status.HTTP_409_CONFLICT,
            )
        if isinstance(exc, TaskConflict):
            return Response({"detail": str(exc), **exc.extra}, status=status.HTTP_409_CONFLICT)
        if isinstance(exc, TaskNotFound):
            exc = Http404(str(exc))
        return super().handle_exception(exc)


class JsonAnswers(DefaultContentNegotiation):
    """The task endpoints answer JSON, whatever the Accept header asks for: their clients are the
    workbench and API clients, all reading JSON, and no other rendering of a task exists. Saves
    weighing the header against DRF's renderers on every request of the annotation loop (where a
    header no renderer met got 406, it gets the JSON). Bodies are parsed as before."""

    def select_renderer(self, request, renderers, format_suffix=None):
        renderer = renderers[0]
        return renderer, renderer.media_type


class TaskWorkApi(WorkApi):
    """The annotation loop's endpoints (claim, autosave, renew, submit, skip): JSON only."""

    renderer_classes = (JSONRenderer,)
    content_negotiation_class = JsonAnswers


class TaskNextApi(TaskWorkApi):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "TaskNextInput"

        exclude = serializers.ListField(
            child=serializers.IntegerField(min_value=1, max_value=BIGINT_MAX),
            required=False,
            default=list,
            max_length=10,
        )

    @extend_schema(
        request=InputSerializer,
        responses={200: TaskOut, 204: OpenApiResponse(description="Nothing left for you."), 404: ErrorOut},
        summary="Claim the next task (or get your active one)",
    )
    def post(self, request, slug: str):
        data, failed = _body(request)
        exclude = None if failed else _plain_exclude(data or {})
        if exclude is not None:
            # The claim's first statement reads the project and the caller's role (404 / 403 as
            # get_project_for), with its lock (annotation/queue/claim.py queue_claim_for).
            project, task = queue_claim_for(slug=slug, user=request.user, role=Role.ANNOTATOR, exclude=exclude)
        else:  # the role first, then the body, which the serializer answers
            project = get_project_for(request.user, slug, Role.ANNOTATOR)
            if failed:
                raise failed
            data = _parse(self.InputSerializer, data or {})
            task = queue_claim_next(project=project, user=request.user, exclude=tuple(data["exclude"]))
        if task is None:
            return Response(status=status.HTTP_204_NO_CONTENT, headers=queue_done_headers(project, request.user))
        return Response(task_view(task=task))


class TaskDraftApi(TaskWorkApi):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "TaskDraftInput"

        draft = serializers.JSONField()
        version = serializers.IntegerField(min_value=0, max_value=2**31 - 1)  # a PositiveIntegerField

        def validate_draft(self, value):
            if not isinstance(value, dict):
                raise serializers.ValidationError("The draft must be a JSON object.")
            return value

    @extend_schema(
        request=InputSerializer,
        responses={200: OpenApiTypes.OBJECT, 400: ErrorOut, 409: ErrorOut},
        summary="Autosave a draft (409 when the version is stale, unless it replays the save that made "
        "the current version); renews the lease",
    )
    def put(self, request, task_id: int):
        body, failed = _body(request)
        plain = None if failed else _plain_draft(body)
        if plain is not None:
            # The plain case, one statement: the caller's active task at the version they saw,
            # their role checked in it (annotation/queue/task_ops.py task_save_draft_plain).
            saved = task_save_draft_plain(
                task_id=task_id, user=request.user, draft=plain[0], version=plain[1], role=Role.ANNOTATOR
            )
            if saved is not None:
                return Response({"task": task_id, "version": saved[0], "lease_expires": saved[1].isoformat()})

        def read_input() -> tuple[dict, int]:
            # Read once the service has checked the task and the caller's role (404 / 403 first).
            if failed:
                raise failed
            data = _parse(self.InputSerializer, body)
            return data["draft"], data["version"]

        # One transaction, one read of the task: the role is checked with the task the save locks
        # (annotation/queue/task_ops.py lock_own_task), as the submit does.
        task = task_save_draft(task_id=task_id, user=request.user, role=Role.ANNOTATOR, read_input=read_input)
        return Response(
            {"task": task.pk, "version": task.draft_version, "lease_expires": task.lease_expires.isoformat()}
        )


class TaskRenewApi(TaskWorkApi):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT, 409: ErrorOut}, summary="Renew the task's lease")
    def post(self, request, task_id: int):
        task = task_renew(task_id=task_id, user=request.user, role=Role.ANNOTATOR)  # one read of the task
        return Response({"task": task.pk, "lease_expires": task.lease_expires.isoformat()})


class TaskSubmitApi(TaskWorkApi):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "TaskSubmitInput"

        result = serializers.JSONField()
        time_spent_ms = serializers.IntegerField(min_value=0, max_value=2_000_000_000, required=False, default=0)

    @extend_schema(
        request=InputSerializer,
        parameters=[IDEMPOTENCY],
        responses={201: AnnotationOut, 200: AnnotationOut, 400: ErrorOut, 409: ErrorOut},
        summary="Submit the result (201; a repeat with the same result returns the same annotation "
        "with 200, one with a different result gets 409 with the stored annotation)",
    )
    def post(self, request, task_id: int):
        key = request.headers.get("Idempotency-Key")
        body, failed = _body(request)
        plain = None if failed else _plain_result(body, key)

        def read_result() -> dict:
            # Read once the service has checked the task and the caller's role (404 / 403 first,
            # as everywhere; the time the client counted is not used: the server measures it).
            if plain is not None:
                return plain
            if failed:
                raise failed
            data = _parse(self.InputSerializer, body)
            if key is not None and len(key) > 200:
                raise ResultInvalid({"Idempotency-Key": "At most 200 characters."})
            return data["result"]

        # One transaction, one read of the task: the role is checked with the task that submit
        # locks (annotation/queue/sql.py SUBMIT_LOCK_SQL), not by a lookup of its own before it.
        outcome = annotation_submit(
            task_id=task_id,
            user=request.user,
            idempotency_key=key,
            role=Role.ANNOTATOR,
            read_result=read_result,
        )
        return Response(
            annotation_view(annotation=outcome.annotation, warnings=outcome.warnings),
            status=status.HTTP_201_CREATED if outcome.created else status.HTTP_200_OK,
        )


class TaskSkipApi(TaskWorkApi):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT, 409: ErrorOut}, summary="Skip the task")
    def post(self, request, task_id: int):
        task = task_skip(task_id=task_id, user=request.user, role=Role.ANNOTATOR)  # one read of the task
        return Response({"task": task.pk, "status": task.status})


class ReviewQueueApi(WorkApi):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="Items waiting for review, with status counts",
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
    )
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.REVIEWER)
        limit = min(max(_query_int(request, "limit", 100), 1), 500)
        offset = max(_query_int(request, "offset", 0), 0)
        return Response(review_queue_for(project=project, limit=limit, offset=offset))


class ItemReviewApi(WorkApi):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "ReviewDecisionInput"

        decision = serializers.ChoiceField(choices=["accept", "edit", "discard"])
        annotation = serializers.IntegerField(
            required=False, allow_null=True, default=None, min_value=1, max_value=BIGINT_MAX
        )
        result = serializers.JSONField(required=False, allow_null=True, default=None)
        comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
        # Accept the labels the item came with from its import, as they are (no annotation).
        imported = serializers.BooleanField(required=False, default=False)

    def _item(self, request, item_id: int) -> Item:
        item = Item.objects.select_related("project").filter(pk=item_id).first()
        if item is None:
            raise Http404("No such item.")
        require_role(request.user, item.project, Role.REVIEWER)
        return item

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="An item with its truth, all annotations side by side and per-field disagreements",
    )
    def get(self, request, item_id: int):
        item = self._item(request, item_id)
        if item.status == ItemStatus.PENDING:
            # Still out for annotation (gold items stay pending): its truth must not reach anyone who
            # may yet answer it blind, and reviewers may annotate too.
            return Response(
                {"detail": "This item is still waiting for annotations; it can be reviewed once annotated."},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(item_review_detail(item=item))

    @extend_schema(
        request=InputSerializer,
        responses={201: OpenApiTypes.OBJECT, 400: ErrorOut, 409: ErrorOut},
        summary="Accept an annotation, save an edited answer, or discard the item",
    )
    def post(self, request, item_id: int):
        self._item(request, item_id)
        data = _parse(self.InputSerializer, request.data)
        review = review_decide(
            item_id=item_id,
            reviewer=request.user,
            decision=data["decision"],
            annotation_id=data["annotation"],
            result=data["result"],
            comment=data["comment"],
            imported=data["imported"],
        )
        return Response(
            {
                "review": review.pk,
                "item": item_id,
                "decision": review.decision,
                "status": review.item.status,
                "reviewer": request.user.username,
                "created_at": review.created_at.isoformat(),
                "payload": review.item.payload,
            },
            status=status.HTTP_201_CREATED,
        )


class AgreementApi(WorkApi):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT}, summary="Progress and agreement: per status, per annotator, per workflow"
    )
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.REVIEWER)
        return Response(project_agreement(project=project))
