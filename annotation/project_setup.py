"""Creating a project in the app (page and API): its protocol, annotations per item and the
workflow settings of Project.settings, checked field by field; the creator becomes its admin.
The check of each Project.settings key (SETTING_RULES: one per key that some code reads, with the
reader it guards), shared by the create path and the admin's project form
(project_settings_check, which also refuses keys nothing reads). Changing a project's
disagreement thresholds (the project settings page and API, and the admin's project form, all
checked by disagreement_setting_clean), which re-marks the items waiting for review.

Who may create one is annotation.permissions.can_create_projects; the thresholds are its
researchers' (views/project_settings.py, apis/project_settings.py).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from protocols import registry

from .audit.record import audit_record
from .disagreement import THRESHOLDS_OF_WORKFLOW, thresholds_clean, thresholds_from
from .models import (
    WORKFLOW_OF_PROTOCOL,
    AuditAction,
    Item,
    ItemStatus,
    Membership,
    Project,
    Role,
    Workflow,
    default_annotations_per_item,
)
from .protocols import rating_criteria
from .verification import items_mark_disagreement, project_marking_lock

logger = logging.getLogger(__name__)

# Paths under /projects/ that are pages, not projects.
RESERVED_SLUGS = {"new"}
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
MAX_ANNOTATIONS_PER_ITEM = 50
LEASE_RANGE = (60, 24 * 3600)
MAX_RUBRIC = 5000
MAX_CITATION = 5000
MAX_LICENSE = 100
MAX_STATE_LABEL = 2000  # as long as an imported box item's state may be (protocols/fields.py text)
DEFAULT_LEASE_SECONDS = 600  # a task's lease (queue/rules.py reads it from here)


class SetupInvalid(ValueError):
    """Input refused before anything is written; `errors` maps a field to a message."""

    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


def _whole(value: Any, name: str, low: int, high: int, errors: dict[str, str]) -> int | None:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON's 900.0
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        errors[name] = f"A whole number from {low} to {high}."
        return None
    return value


def _flag(value: Any, name: str, errors: dict[str, str]) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "on", "1", "yes", "false", "off", "0", "no", ""):
        return value.lower() in ("true", "on", "1", "yes")
    errors[name] = "true or false."
    return None


def _text(value: Any, most: int, *, what: str, one_line: bool = False) -> tuple[str | None, str]:
    """(the text stripped, "") or (None, why not); `what` says what an empty or missing one must be."""
    if not isinstance(value, str) or not value.strip():
        return None, what
    value = value.strip()
    if len(value) > most:
        return None, f"At most {most} characters."
    if one_line and ("\n" in value or "\r" in value):
        return None, "One line."
    return value, ""


# --- Project.settings, key by key ------------------------------------------------------------------
# Each check takes what a person gave (JSON from the admin, form text from the create page) and
# returns the value its reader expects, or None with errors[<key>] set. The reader and its default
# are named beside each: a value the check lets through is one the reader uses as it is.


def gold_share_clean(value: Any, errors: dict[str, str]) -> float | None:
    """gold_share, read by queue/claim.py (float; default 0: no gold items offered)."""
    try:
        share = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        share = None
    if share is None or not math.isfinite(share) or not 0 <= share <= 1:
        errors["gold_share"] = "A share from 0 to 1 (e.g. 0.1 for one claim in ten)."
        return None
    return share


def lease_seconds_clean(value: Any, errors: dict[str, str]) -> int | None:
    """lease_seconds, read by queue/rules.lease_seconds (int(); default DEFAULT_LEASE_SECONDS)."""
    return _whole(value, "lease_seconds", *LEASE_RANGE, errors)


def auto_verify_clean(value: Any, errors: dict[str, str]) -> bool | None:
    """auto_verify, read by queue/submit.py and amend.py as true or not (default false): a text
    such as "no" would read as true, so only true or false is stored."""
    return _flag(value, "auto_verify", errors)


def suggestions_clean(value: Any, errors: dict[str, str]) -> bool | None:
    """suggestions, read by selectors.shows_suggestions (off only when false; default true)."""
    return _flag(value, "suggestions", errors)


def multiple_clean(value: Any, errors: dict[str, str]) -> bool | None:
    """multiple, read by a QA protocol's answer_shape (protocols/base.py; used only when true or
    false, else the protocol's default)."""
    return _flag(value, "multiple", errors)


def rubric_clean(value: Any, errors: dict[str, str]) -> str | dict[str, str] | None:
    """rubric, read by selectors.rubric_text_for (one text for the whole scale) and rubric_for
    (criterion -> text over the protocol's default_rubric), and by a rating protocol's judge
    (inference/services/inputs.py):
    one text, or an object of rating criteria's texts."""
    if isinstance(value, str):
        text, why = _text(
            value, MAX_RUBRIC, what="One text, or criterion -> text; leave the rubric out for the default."
        )
        if why:
            errors["rubric"] = why
        return text
    criteria = rating_criteria()
    unknown = sorted(str(k) for k in value if k not in criteria) if isinstance(value, dict) else []
    if not isinstance(value, dict) or not value or unknown:
        errors["rubric"] = (
            f"{', '.join(unknown)}: not a rating criterion. " if unknown else ""
        ) + f"One text, or criterion -> text with criteria from: {', '.join(criteria)}."
        return None
    texts: dict[str, str] = {}
    for criterion in (c for c in criteria if c in value):
        text, why = _text(value[criterion], MAX_RUBRIC, what="A text; leave the criterion out for its default.")
        if why:
            errors["rubric"] = f"{criterion}: {why}"
            return None
        texts[criterion] = text
    return texts


def state_labels_clean(value: Any, errors: dict[str, str]) -> dict[str, list[str]] | None:
    """state_labels, read by selectors.box_candidates (object -> extra state labels; default none):
    an object of lists of labels (a text in place of a list would offer its letters)."""
    if not isinstance(value, dict) or not value:
        errors["state_labels"] = 'Object name -> list of state labels, e.g. {"apple": ["sliced apple"]}.'
        return None
    clean: dict[str, list[str]] = {}
    for name, labels in value.items():
        if not name.strip():
            errors["state_labels"] = "An object name is empty."
            return None
        if not isinstance(labels, list) or not labels:
            errors["state_labels"] = f"{name}: a list of one or more state labels."
            return None
        out: list[str] = []
        for label in labels:
            text, why = _text(label, MAX_STATE_LABEL, what="A state label is a non-empty text.")
            if why:
                errors["state_labels"] = f"{name}: {why}"
                return None
            if text not in out:
                out.append(text)
        clean[name] = out
    return clean


def license_clean(value: Any, errors: dict[str, str]) -> str | None:
    """license, read by interchange/hf.py for the dataset card's YAML (default "other")."""
    text, why = _text(
        value, MAX_LICENSE, what='A license identifier such as cc-by-4.0; leave it out for "other".', one_line=True
    )
    if why:
        errors["license"] = why
    return text


def citation_clean(value: Any, errors: dict[str, str]) -> str | None:
    """citation, read by interchange/hf.py (.strip(), BibTeX for the dataset card; default none)."""
    text, why = _text(value, MAX_CITATION, what="A text (BibTeX); leave it out for none.")
    if why:
        errors["citation"] = why
    return text


def _disagreement_clean(value: Any, errors: dict[str, str], *, protocol: str) -> dict | None:
    """disagreement, read by disagreement.thresholds_from: the thresholds of the project's workflow."""
    clean, refused = disagreement_setting_clean(workflow=WORKFLOW_OF_PROTOCOL[protocol], values=value)
    errors.update(
        {name if name == "disagreement" else f"disagreement.{name}": reason for name, reason in refused.items()}
    )
    return None if refused else clean


def _excluded_raters_clean(value: Any, errors: dict[str, str]) -> list[str] | None:
    """arena_excluded_raters, read by evaluation/rater_exclusion.py (loaded on first use: SciPy)."""
    from protocols.arena.integrity import excluded_raters_clean

    return excluded_raters_clean(value, errors)


@dataclass(frozen=True)
class SettingRule:
    clean: Callable[..., Any]  # (value, errors) -> clean value, or None with the error in errors
    # A protocol-specific key: read only by the protocols listing it in their settings_keys
    # (protocols/base.py); None: every project reads it.
    key: str | None = None
    takes_protocol: bool = False  # clean(value, errors, protocol=...)

    @property
    def protocols(self) -> tuple[str, ...]:
        """The protocols whose projects' code reads the key."""
        names = registry.names()
        return names if self.key is None else tuple(n for n in names if self.key in registry.get(n).settings_keys)


# Every key of Project.settings that the code reads (models.Project.settings documents them).
SETTING_RULES: dict[str, SettingRule] = {
    "gold_share": SettingRule(gold_share_clean),
    "lease_seconds": SettingRule(lease_seconds_clean),
    "auto_verify": SettingRule(auto_verify_clean),
    "suggestions": SettingRule(suggestions_clean, key="suggestions"),
    "rubric": SettingRule(rubric_clean, key="rubric"),
    "state_labels": SettingRule(state_labels_clean, key="state_labels"),
    "multiple": SettingRule(multiple_clean, key="multiple"),
    "disagreement": SettingRule(_disagreement_clean, takes_protocol=True),
    "license": SettingRule(license_clean),
    "citation": SettingRule(citation_clean),
    # The raters a researcher left out of the arena board (evaluation/rater_exclusion.py).
    "arena_excluded_raters": SettingRule(_excluded_raters_clean, key="arena_excluded_raters"),
}


def project_setting(settings: Any, key: str, default: Any, *, project: str = "") -> Any:
    """What the code reads for `key` of a project's stored settings: the value as its SETTING_RULES
    check cleans it; `default` when it is missing, and also, with a logged warning (`project`, its
    slug, names it), when the check refuses what is stored (a value written straight into the
    database), so a bad stored value never breaks a page. The disagreement thresholds are read by
    disagreement.thresholds_from, which does the same for each threshold."""
    where = f" of project {project}" if project else ""
    if not isinstance(settings, dict):
        if settings is not None:
            logger.warning(
                "settings%s is not a JSON object (%.80r): %s takes its default %r", where, settings, key, default
            )
        return default
    if key not in settings or settings[key] is None:
        return default
    errors: dict[str, str] = {}
    value = SETTING_RULES[key].clean(settings[key], errors)
    if errors:
        logger.warning(
            "settings['%s']%s is invalid (%.80r; %s): its default %r applies",
            key,
            where,
            settings[key],
            "; ".join(errors.values()),
            default,
        )
        return default
    return value


def project_settings_check(*, protocol: str, settings: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """A whole Project.settings object as a person typed it (the admin's project form), checked key
    by key with SETTING_RULES: (clean, errors by key; a threshold's as "disagreement.<name>"). A
    key that no code reads, or that the project's protocol does not read, is refused too: it would
    change nothing, silently."""
    if not isinstance(settings, dict):
        return {}, {"settings": 'Workflow settings are one JSON object, e.g. {"auto_verify": true}.'}
    clean: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for key, value in settings.items():
        rule = SETTING_RULES.get(key)
        if rule is None:
            errors[str(key)] = f"Not a project setting; the settings are {', '.join(SETTING_RULES)}."
            continue
        if protocol not in rule.protocols:
            errors[key] = f"Only {', '.join(registry.get(p).label for p in rule.protocols)} projects read it."
            continue
        before = len(errors)
        value = rule.clean(value, errors, protocol=protocol) if rule.takes_protocol else rule.clean(value, errors)
        if len(errors) == before:
            clean[key] = value
    return clean, errors


def project_settings_clean(
    *,
    protocol: str,
    gold_share: Any = 0,
    suggestions: Any = True,
    lease_seconds: Any = DEFAULT_LEASE_SECONDS,
    rubric: Any = "",
    errors: dict[str, str],
) -> dict:
    """The settings object a new project stores (keys as documented on Project.settings), each
    checked by its SETTING_RULES check; an empty form field is the default."""
    out: dict[str, Any] = {}
    share = gold_share_clean(gold_share if gold_share not in (None, "") else 0, errors)
    if share:
        out["gold_share"] = share
    lease = lease_seconds_clean(lease_seconds if lease_seconds not in (None, "") else DEFAULT_LEASE_SECONDS, errors)
    if lease is not None:
        out["lease_seconds"] = lease
    shown = suggestions_clean(suggestions if suggestions is not None else True, errors)
    if shown is False and protocol in SETTING_RULES["suggestions"].protocols:
        out["suggestions"] = False  # only quintuplet and QA forms offer suggestions
    text = rubric if rubric is not None else ""
    if not isinstance(text, str):
        errors["rubric"] = "The rubric is one text."
    elif text.strip():
        if protocol not in SETTING_RULES["rubric"].protocols:
            errors["rubric"] = (
                "A rubric is for video rating projects only ("
                f"{', '.join(registry.get(p).label for p in SETTING_RULES['rubric'].protocols)})."
            )
        elif (text := rubric_clean(text, errors)) is not None:
            out["rubric"] = text
    return out


@transaction.atomic
def project_create(
    *,
    user,
    name: Any,
    slug: Any,
    protocol: Any,
    annotations_per_item: Any = None,
    gold_share: Any = 0,
    suggestions: Any = True,
    lease_seconds: Any = DEFAULT_LEASE_SECONDS,
    rubric: Any = "",
    description: Any = "",
) -> Project:
    """Create a project with its settings and make `user` its admin. Raises SetupInvalid naming
    each bad field (nothing written). The caller checks can_create_projects."""
    errors: dict[str, str] = {}
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > 200:
        errors["name"] = "A name of 1 to 200 characters."
    slug = slug.strip() if isinstance(slug, str) else ""
    if not SLUG_RE.match(slug) or len(slug) > 80:
        errors["slug"] = "Lowercase letters, digits, '-' and '_' (up to 80), starting with a letter or digit."
    elif slug in RESERVED_SLUGS:
        errors["slug"] = f"'{slug}' is reserved; choose another."
    elif Project.objects.filter(slug=slug).exists():
        errors["slug"] = f"A project '{slug}' exists already."
    if protocol not in registry.names():
        errors["protocol"] = f"One of: {', '.join(registry.names())}."
        protocol = ""
    per_item = None
    if annotations_per_item not in (None, ""):
        per_item = _whole(annotations_per_item, "annotations_per_item", 1, MAX_ANNOTATIONS_PER_ITEM, errors)
    if description is not None and not isinstance(description, str):
        errors["description"] = "A text."
    settings = project_settings_clean(
        protocol=protocol,
        gold_share=gold_share,
        suggestions=suggestions,
        lease_seconds=lease_seconds,
        rubric=rubric,
        errors=errors,
    )
    if errors:
        raise SetupInvalid(errors)
    try:
        with transaction.atomic():
            project = Project.objects.create(
                name=name,
                slug=slug,
                protocol=protocol,
                settings=settings,
                description=(description or "").strip(),
                annotations_per_item=per_item or default_annotations_per_item(protocol),
            )
    except IntegrityError:  # the same slug, created a moment ago by someone else
        raise SetupInvalid({"slug": f"A project '{slug}' exists already."}) from None
    Membership.objects.create(project=project, user=user, role=Role.ADMIN)
    audit_record(
        action=AuditAction.PROJECT_CREATE,
        actor=user,
        project=project,
        obj=project,
        details={
            "protocol": protocol,
            "annotations_per_item": project.annotations_per_item,
            "settings": settings,
            "creator_role": Role.ADMIN,
        },
    )
    return project


def disagreement_setting_clean(*, workflow: str, values: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The check of disagreement thresholds on every path that writes them: (clean, errors by
    name). `values` must be a JSON object holding only thresholds of the workflow, each as
    disagreement.thresholds_clean takes it (the read path, disagreement.thresholds_from, applies the
    same check to what is stored)."""
    if not isinstance(values, dict):
        return {}, {"disagreement": 'A JSON object of thresholds, e.g. {"box_iou": 0.5}.'}
    names = THRESHOLDS_OF_WORKFLOW[workflow]
    kind = Workflow(workflow).label if workflow in Workflow.values else workflow  # or a protocol's own form
    errors = {str(name): f"Not a threshold of {kind} projects." for name in sorted(set(values) - set(names), key=str)}
    clean, refused = thresholds_clean({name: values[name] for name in names if name in values})
    errors.update(refused)
    return clean, errors


def project_thresholds_changed(*, project: Project, actor, before: dict, set_values: dict, via: str = "") -> dict:
    """After the project's settings["disagreement"] changed (saved by the caller, in its
    transaction, which holds the project row: the caller's lock or its UPDATE; `before` is
    thresholds_from().as_dict() of the settings it replaced): when the thresholds in force changed,
    re-mark the items waiting for review; record the change in the audit trail. Returns
    {"thresholds", "items_remarked", "items_marked"}."""
    names = THRESHOLDS_OF_WORKFLOW[project.workflow]
    after = thresholds_from(project.settings, project=project.slug).as_dict()
    waiting: list[int] = []
    marked = 0
    if after != before:  # (a default written out explicitly changes what is stored, not what is marked)
        # Before listing them: a submit completing an item now either commits first (listed here)
        # or marks after this commits, under these thresholds (verification.py's marking lock).
        project_marking_lock(project=project)
        waiting = list(
            Item.objects.filter(project=project, status=ItemStatus.ANNOTATED, is_gold=False).values_list(
                "pk", flat=True
            )
        )
        marked = items_mark_disagreement(project=project, item_ids=waiting)
    changes = {name: {"before": before[name], "after": after[name]} for name in names if before[name] != after[name]}
    details = {"disagreement": changes, "set": set_values, "items_remarked": len(waiting), "items_marked": marked}
    audit_record(
        action=AuditAction.PROJECT_SETTINGS,
        actor=actor,
        project=project,
        obj=project,
        details={**details, "via": via} if via else details,
    )
    return {"thresholds": after, "items_remarked": len(waiting), "items_marked": marked}


@transaction.atomic
def project_thresholds_set(*, project: Project, actor, values: dict[str, Any]) -> dict:
    """Set the disagreement thresholds of the project's workflow (rating_spread, box_iou or
    quintuplet_fields; disagreement.thresholds_clean checks them) in settings["disagreement"].
    A change re-marks every item waiting for review with the new thresholds (verified and
    discarded items keep what they had) and is recorded in the audit trail; setting what is
    stored already changes nothing. A stored value the check refuses (read as its default) is
    dropped by a change. Raises SetupInvalid naming each bad field (nothing written).
    Returns {"changed", "thresholds", "items_remarked", "items_marked"}."""
    # One change at a time. NO KEY UPDATE: the key stays, so rows that refer to the project (audit
    # records, imported items) are not held up. Lock order: this row, the marking lock, the items
    # (verification.py's marking lock says why that cannot deadlock with a submit).
    project = Project.objects.select_for_update(no_key=True).get(pk=project.pk)
    clean, errors = disagreement_setting_clean(workflow=project.workflow, values=values)
    if errors:
        raise SetupInvalid(errors)
    stored = project.settings.get("disagreement")
    stored = dict(stored) if isinstance(stored, dict) else {}
    before = thresholds_from(project.settings, project=project.slug).as_dict()
    kept, _refused = disagreement_setting_clean(workflow=project.workflow, values=stored)
    wanted = {**kept, **clean}
    if wanted == stored:
        return {"changed": False, "thresholds": before, "items_remarked": 0, "items_marked": 0}
    project.settings = {**project.settings, "disagreement": wanted}
    project.save(update_fields=["settings"])
    outcome = project_thresholds_changed(project=project, actor=actor, before=before, set_values=clean)
    return {"changed": True, **outcome}
