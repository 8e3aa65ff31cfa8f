"""Raters left out of a votes board: the per-rater consistency screen of a protocol that has one
(its ``rater_screen_module``, protocols/base.py) shown with the board, and a researcher's exclusion
(or re-inclusion) of a rater, recorded in the audit trail. This module names no protocol.

The excluded raters' keys ("user:<id>", "ext:<name>": selectors.rater_key) are kept in the project's
settings under the screen module's ``EXCLUDED_SETTING`` (the protocol lists it in its settings_keys
and checks it: annotation/setting_rules.py). Every board of the project (live and per release) is
fitted without their votes; the board's cache key names the list (board_cache.board), so a change
gives a new board at once.
The screen is always of every rater's votes, excluded ones included, so their figures stay in view.

Service: ``rater_exclusion_set`` (one change per call, audited with the actor, the rater and the
rater's screen figures on the live board at the time). API: POST
/api/projects/<slug>/raters/exclusions/ {"rater": "<key>", "excluded": true|false}: 400 naming a bad
body or a rater with no vote in the project, 404 for a project the caller may not see or one whose
protocol has no rater screen (no ``rater_screen_module``), 403 below the researcher role.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.apis.members import ErrorOut, bad_request
from annotation.audit.record import audit_record
from annotation.models import Annotation, AuditAction, Project, Role
from annotation.permissions import get_project_for
from annotation.project_setup import project_setting
from protocols import registry

from . import selectors

BODY_KEYS = ("rater", "excluded")


class ExclusionRefused(ValueError):
    """A change refused: ``errors`` by field (nothing written)."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


class NoRaterScreen(LookupError):
    """The project's protocol has no rater screen (no ``rater_screen_module``): nothing to exclude from."""


def screen_module(protocol: str) -> Any:
    """The protocol's rater screen (``rater_screen_module``), None for a protocol without one."""
    return registry.get(protocol).rater_screen


def applies(protocol: str) -> bool:
    """Whether the protocol's boards have the rater screen."""
    return registry.get(protocol).rater_screen_module is not None


def excluded_raters(project: Project) -> list[str]:
    """The project's excluded rater keys, sorted (none for a protocol without the screen, or
    where the stored value is refused: project_setting logs it)."""
    screen = screen_module(project.protocol)
    if screen is None:
        return []
    return list(project_setting(project.settings, screen.EXCLUDED_SETTING, [], project=project.slug))


def rater_labels(keys: Sequence[str]) -> dict[str, str]:
    """Rater key -> what the page calls them: a member's username, an imported rater's name."""
    ids = [int(k[5:]) for k in keys if k.startswith("user:") and k[5:].isdigit()]
    names = dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))
    out = {}
    for key in keys:
        kind, _, rest = key.partition(":")
        out[key] = names.get(int(rest), key) if kind == "user" and rest.isdigit() else rest
    return out


def screened(
    project: Project, items: Sequence[Any], votes: Mapping[Any, Sequence[tuple[str, Mapping[str, Any]]]]
) -> tuple[Mapping[Any, Sequence[tuple[str, Mapping[str, Any]]]], dict[str, Any]]:
    """The votes a votes board is fitted on (less the excluded raters'), and what the board adds:
    ``rater_screen`` (every rater's screen row, with ``label`` and ``excluded``), ``excluded_raters``
    (keys with labels), ``excluded_votes`` and a note. Nothing changes for a protocol without the
    screen."""
    integrity = screen_module(project.protocol)
    if integrity is None:
        return votes, {}
    excluded = excluded_raters(project)
    extra: dict[str, Any] = {}
    notes: list[str] = []
    try:
        rows = integrity.screen(items, votes)
    except ValueError as exc:  # an item's gold_winner the screen cannot read: the board still shows
        rows = []
        notes.append(f"rater screen unavailable: {exc}")
    labels = rater_labels([r.rater for r in rows] + excluded)
    gone = set(excluded)
    extra["rater_screen"] = [{**r.to_json(), "label": labels[r.rater], "excluded": r.rater in gone} for r in rows]
    kept, dropped = integrity.without_raters(votes, excluded)
    extra["excluded_raters"] = [{"rater": k, "label": labels[k]} for k in excluded]
    extra["excluded_votes"] = dropped
    if excluded:
        n = len(excluded)
        notes.append(
            f"{n} rater{'s' if n != 1 else ''} excluded by a researcher: "
            f"{dropped} vote{'s' if dropped != 1 else ''} left out of the ratings"
        )
    extra["screen_notes"] = notes
    return kept, extra


def no_screen_message(project: Project) -> str:
    """Why a project has no raters to exclude: its protocol brings no rater screen."""
    return (
        f"this project's protocol has no rater screen: project {project.slug} is {project.protocol}, "
        "whose protocol brings no rater_screen_module, so its boards have no raters to exclude"
    )


def _has_voted(project: Project, rater: str) -> bool:
    kind, _, rest = rater.partition(":")
    votes = Annotation.objects.filter(item__project=project)
    if kind == "user":
        return votes.filter(annotator_id=int(rest)).exists()
    return votes.filter(annotator__isnull=True, external_rater=rest).exists()


def _screen_row(project: Project, rater: str) -> dict[str, Any] | None:
    """The rater's screen figures on the live board now (None: no screened vote there)."""
    integrity = screen_module(project.protocol)
    items = selectors.vote_items(project, None)
    try:
        rows = integrity.screen(items, selectors.votes_by_item(items))
    except ValueError:
        return None
    return next((r.to_json() for r in rows if r.rater == rater), None)


def body_errors(data: Any, integrity: Any) -> dict[str, str]:
    """What is wrong with a request body (none: it names a rater and true or false); ``integrity``:
    the project's rater screen module, which knows a rater key's shape (None: any text)."""
    if not isinstance(data, dict):
        return {"body": 'A JSON object: {"rater": "<rater key>", "excluded": true or false}.'}
    errors = {str(k): f"Not a field; the fields are {', '.join(BODY_KEYS)}." for k in data if k not in BODY_KEYS}
    if "rater" not in data:
        errors["rater"] = "Required: a rater key from the board's rater screen, e.g. user:12 or ext:r7."
    elif integrity is not None and not integrity.rater_key_valid(data["rater"]):
        errors["rater"] = (
            f"Got {data['rater']!r}; expected a rater key: user:<id> or ext:<name> (up to 200 characters)."
        )
    if not isinstance(data.get("excluded"), bool):
        got = f"got {data['excluded']!r}" if "excluded" in data else "missing"
        errors["excluded"] = f"true (leave the rater out of the board) or false (count them again); {got}."
    return errors


@transaction.atomic
def rater_exclusion_set(*, project: Project, actor, rater: Any, excluded: Any) -> dict[str, Any]:
    """Exclude ``rater`` from the project's votes boards (``excluded`` true) or count them again
    (false). A rater is excluded only when they have voted in the project; one already in the list
    can always be included again. A change is recorded in the audit trail (project_settings: the
    rater, the new list and the rater's screen figures on the live board); asking for what is
    stored already changes nothing. Raises ExclusionRefused (bad fields; nothing written) and
    NoRaterScreen. Returns {"rater", "excluded", "changed", "excluded_raters", "screen"}."""
    integrity = screen_module(project.protocol)
    if integrity is None:
        raise NoRaterScreen(no_screen_message(project))
    errors = body_errors({"rater": rater, "excluded": excluded}, integrity)
    if errors:
        raise ExclusionRefused(errors)
    setting = integrity.EXCLUDED_SETTING
    # One change at a time; NO KEY UPDATE leaves rows referring to the project (audit events) free.
    project = Project.objects.select_for_update(no_key=True).get(pk=project.pk)
    current = excluded_raters(project)
    if rater not in current and not _has_voted(project, rater):
        raise ExclusionRefused(
            {"rater": f"{rater!r} has no vote in project {project.slug}; pick a rater of the board's rater screen."}
        )
    wanted = sorted(set(current) | {rater}) if excluded else [k for k in current if k != rater]
    screen = _screen_row(project, rater)
    out = {"rater": rater, "excluded": excluded, "changed": wanted != current, "screen": screen}
    if wanted == current:
        return {**out, "excluded_raters": current}
    settings = dict(project.settings) if isinstance(project.settings, dict) else {}
    if wanted:
        settings[setting] = wanted
    else:
        settings.pop(setting, None)
    project.settings = settings
    project.save(update_fields=["settings"])
    audit_record(
        action=AuditAction.PROJECT_SETTINGS,
        actor=actor,
        project=project,
        obj=project,
        details={
            "setting": setting,
            "rater": rater,
            "rater_label": rater_labels([rater])[rater],
            "excluded": excluded,
            "excluded_raters": wanted,
            # the rater's figures on the live board when the change was made (None: no screened vote)
            "screen": screen,
        },
    )
    return {**out, "excluded_raters": wanted}


class RaterExclusionApi(APIView):
    parser_classes = [JSONParser]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "RaterExclusionInput"

        rater = serializers.CharField(help_text="a rater key of the board's rater_screen: user:<id> or ext:<name>")
        excluded = serializers.BooleanField(
            help_text="true: leave the rater's votes out of the board; false: count them"
        )

    @extend_schema(
        request=InputSerializer,
        responses={200: OpenApiTypes.OBJECT, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
        summary="Exclude a rater from the project's votes boards, or include them again (audited); "
        "for a protocol with a rater screen",
    )
    def post(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        integrity = screen_module(project.protocol)
        if integrity is None:
            raise Http404(no_screen_message(project))
        errors = body_errors(request.data, integrity)
        if errors:
            return bad_request(errors)
        try:
            outcome = rater_exclusion_set(
                project=project, actor=request.user, rater=request.data["rater"], excluded=request.data["excluded"]
            )
        except NoRaterScreen as exc:
            raise Http404(str(exc)) from None
        except ExclusionRefused as exc:
            return bad_request(exc.errors)
        return Response(outcome)
