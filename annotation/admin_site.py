"""The Django admin for researchers: who may open it, and what a project's researcher sees in it.

A project's researchers (and its admins) use the admin for their own projects without being
superusers. They are let in by the site itself, `StateLabAdminSite.has_permission`,
rather than by setting `is_staff` whenever someone becomes a researcher: `is_staff` is a global
flag that would have to be kept in step with every membership change (and taken away only when it
was not given for another reason, which nothing records), and it would let them into every admin
page that Django model permissions open. Deciding from the membership at each request has nothing
to keep in step: a researcher removed from their last project is out at their next click.

Inside, the project's rows are the rights: `ProjectScopedAdmin` shows a non-superuser the rows of
the projects where they are researcher or admin and nothing else (the projects themselves:
`OwnProjectsAdmin`, which their admins change) (a row's project may be some
relations away: `project_field`); its object permissions follow the same rule (Django model
permissions are not consulted), so a URL naming another project's object finds no object and the
admin redirects as for a missing one. Records that change only through the services' rules (the
audit trail, invites, studies, predictions, ...) are `ReadOnlyAdmin`: viewed, never added, changed
or deleted here, by superusers neither. Admins that are not scoped keep Django's model permissions
(a researcher holds none); users, groups and tokens are for superusers only (`SuperuserOnlyAdmin`).
The page header links here for whoever `has_permission` lets in (`admin_link`, a context processor).

Rows the admin does change and whose changes reach what annotators, reviewers or releases see (a
project, its items, annotations and reviews, media files) are `AuditedAdmin`s: each save and delete
made here is an audit event naming who changed what (docs/architecture.md, "Invariants": who did what is recorded).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.functional import SimpleLazyObject

from .audit.record import audit_record, row_changes, row_values
from .models import AuditAction, Project, Release, Role
from .permissions import is_researcher_anywhere, projects_with_role
from .tokens import tokens_revoke

# What a project's researcher may do in a scoped admin, unless the admin says less.
ALL_ACTIONS = ("view", "add", "change", "delete")


def may_use_admin(user) -> bool:
    """Staff, superusers, and the researchers and admins of any project (asked once per request:
    the request's user object is the cache)."""
    if not user.is_active:
        return False
    if user.is_staff:
        return True
    cached = getattr(user, "_statelab_may_use_admin", None)
    if cached is None:
        cached = user._statelab_may_use_admin = is_researcher_anywhere(user)
    return cached


class ResearcherAuthenticationForm(AdminAuthenticationForm):
    """The admin's login form, which lets in the researchers the site lets in (Django's own asks for
    is_staff); everyone else gets Django's refusal, worded for the people who may use it."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Please enter the correct %(username)s and password of a staff account or of a "
        "project's researcher. Note that both fields may be case-sensitive.",
    }

    def confirm_login_allowed(self, user):
        AuthenticationForm.confirm_login_allowed(self, user)
        if not may_use_admin(user):
            raise ValidationError(
                self.error_messages["invalid_login"],
                code="invalid_login",
                params={"username": self.username_field.verbose_name},
            )


class StateLabAdminSite(admin.AdminSite):
    """Django's admin site, open to staff and to the researchers and admins of any project."""

    site_header = "StateLab administration"
    site_title = "StateLab admin"
    login_form = ResearcherAuthenticationForm

    def has_permission(self, request) -> bool:
        return may_use_admin(request.user)

    def logout(self, request, extra_context=None):
        """The admin's sign-out ends API access too, as the app's does (annotation/views/account.py)."""
        user = request.user if request.user.is_authenticated else None
        response = super().logout(request, extra_context)
        if user is not None and request.method == "POST":
            tokens_revoke(user=user)
        return response


def admin_link(request) -> dict:
    """Context processor: whether the page header links to the admin (asked only when a page shows it)."""
    return {"admin_allowed": SimpleLazyObject(lambda: admin.site.has_permission(request))}


def researcher_project_ids(request) -> set[int]:
    """Projects where the request's user is researcher or admin (kept on the request)."""
    ids = getattr(request, "_statelab_admin_projects", None)
    if ids is None:
        ids = set(projects_with_role(request.user, Role.RESEARCHER).values_list("pk", flat=True))
        request._statelab_admin_projects = ids
    return ids


class ProjectScopedAdmin(admin.ModelAdmin):
    """Rows that belong to a project (`obj.project`, or the project at the end of `project_field`,
    e.g. "item__project"). A superuser sees them all, with the model admin's own rules; anyone else
    sees the rows of their researcher projects and may do there what `researcher_actions` allows,
    and the forms offer only those projects and their releases."""

    researcher_actions: tuple[str, ...] = ALL_ACTIONS
    project_field = "project"

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(**{f"{self.project_field}__in": researcher_project_ids(request)})

    def project_id_of(self, obj) -> int | None:
        """The id of the project `obj` belongs to, following `project_field`."""
        *hops, last = self.project_field.split("__")
        for hop in hops:
            obj = getattr(obj, hop, None)
            if obj is None:
                return None
        return getattr(obj, f"{last}_id", None)

    def may(self, request, action: str, obj=None) -> bool:
        """Whether a non-superuser may do `action` (to `obj`, or to some row when None)."""
        if action not in self.researcher_actions:
            return False
        projects = researcher_project_ids(request)
        return bool(projects) if obj is None else self.project_id_of(obj) in projects

    def has_module_permission(self, request):
        if request.user.is_superuser:
            return super().has_module_permission(request)
        return self.may(request, "view")

    def has_view_permission(self, request, obj=None):
        if request.user.is_superuser:
            return super().has_view_permission(request, obj)
        return self.may(request, "view", obj) or self.may(request, "change", obj)

    def has_add_permission(self, request, *args):
        if request.user.is_superuser:
            return super().has_add_permission(request, *args)
        return self.may(request, "add")

    def has_change_permission(self, request, obj=None):
        if request.user.is_superuser:
            return super().has_change_permission(request, obj)
        return self.may(request, "change", obj)

    def has_delete_permission(self, request, obj=None):
        if request.user.is_superuser:
            return super().has_delete_permission(request, obj)
        return self.may(request, "delete", obj)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if not request.user.is_superuser:
            if db_field.related_model is Project:
                kwargs["queryset"] = Project.objects.filter(pk__in=researcher_project_ids(request))
            elif db_field.related_model is Release:
                kwargs["queryset"] = Release.objects.filter(project_id__in=researcher_project_ids(request))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


def admin_project_ids(request) -> set[int]:
    """Projects where the request's user is admin (kept on the request)."""
    ids = getattr(request, "_statelab_admin_role_projects", None)
    if ids is None:
        ids = set(projects_with_role(request.user, Role.ADMIN).values_list("pk", flat=True))
        request._statelab_admin_role_projects = ids
    return ids


class OwnProjectsAdmin(ProjectScopedAdmin):
    """The projects themselves. A non-superuser sees the projects where they are researcher or admin
    and changes those where they are admin (name, description, workflow settings), the fields that
    decide what the project's rows mean staying read only (`fixed_fields`); they add none here (the
    app's new-project page does, annotation/views/members.py) and delete none."""

    researcher_actions = ("view", "change")
    fixed_fields = ("slug", "protocol", "annotations_per_item", "option_seed")

    def get_queryset(self, request):
        qs = admin.ModelAdmin.get_queryset(self, request)
        if request.user.is_superuser:
            return qs
        return qs.filter(pk__in=researcher_project_ids(request))

    def project_id_of(self, obj) -> int | None:
        return obj.pk

    def may(self, request, action: str, obj=None) -> bool:
        if action == "change":
            projects = admin_project_ids(request)
            return bool(projects) if obj is None else obj.pk in projects
        return super().may(request, action, obj)

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        if request.user.is_superuser:
            return fields
        return fields + tuple(f for f in self.fixed_fields if f not in fields)


class AuditedAdmin:
    """Mixed into (before) the ModelAdmin of rows whose changes reach what annotators, reviewers or
    releases see: a save made here records an admin_change event (details.changes: each changed
    field's before and after, a JSON object field such as an item's payload by its changed
    top-level keys; details.added for a new row), a delete an admin_delete event with the row as it
    was, in the same transaction as the change, with the signed-in user as the actor.
    `audit_project` leads from the row to its project ("" for a project itself, None for rows of
    no project)."""

    audit_project: str | None = "project"

    def _audit_project_of(self, obj) -> Project | None:
        if self.audit_project is None:
            return None
        for hop in filter(None, self.audit_project.split("__")):
            obj = getattr(obj, hop, None)
        return obj

    def save_model(self, request, obj, form, change):
        stored = type(obj)._default_manager.filter(pk=obj.pk).first() if change else None
        before = row_values(stored) if stored is not None else {}
        super().save_model(request, obj, form, change)
        changes = row_changes(before, row_values(obj))
        if changes:
            audit_record(
                action=AuditAction.ADMIN_CHANGE,
                actor=request.user,
                project=self._audit_project_of(obj),
                obj=obj,
                details={"changes": changes, **({} if change else {"added": True})},
            )

    def _audit_delete(self, request, obj) -> None:
        audit_record(
            action=AuditAction.ADMIN_DELETE,
            actor=request.user,
            project=self._audit_project_of(obj),
            obj=obj,
            details={"deleted": row_values(obj)},
        )

    def delete_model(self, request, obj):
        with transaction.atomic():
            self._audit_delete(request, obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for obj in queryset:
                self._audit_delete(request, obj)
            super().delete_queryset(request, queryset)


class ReadOnlyAdmin:
    """Mixed into an admin (before the ModelAdmin) whose rows change only through the services that
    keep their rules and audit trail (or never change): viewed by whoever the admin lets view, and
    added, changed or deleted by nobody here, superusers included."""

    def has_add_permission(self, request, *args):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ProjectRecordAdmin(ReadOnlyAdmin, ProjectScopedAdmin):
    """A project's records (`project_field` leads to it): its researchers and admins view them, and
    nobody edits them here."""

    researcher_actions = ("view",)


class SuperuserOnlyAdmin:
    """Mixed into an admin whose pages only superusers open (users, groups, tokens): staff with
    model permissions and researchers get no entry in the index and a 403 by URL."""

    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_add_permission(self, request, *args):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser


class UsernameField(forms.ModelChoiceField):
    """A user named by username or e-mail, typed (a researcher adding a member sees no list of
    everyone's accounts)."""

    widget = forms.TextInput

    def to_python(self, value):
        if value in self.empty_values:
            return None
        value = str(value).strip()
        found = list(self.queryset.filter(username=value)) or list(self.queryset.filter(email__iexact=value)[:2])
        if len(found) != 1:
            why = "several users have" if found else "no user has"
            raise ValidationError(f"{why} the username or e-mail {value!r}", code="invalid_choice")
        return found[0]
