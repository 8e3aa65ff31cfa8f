"""The check of each Project.settings key: SETTING_RULES, one per shared key that some code reads,
with the reader it guards, and the checks of keys a protocol reads itself (Protocol.setting_check,
protocols/base.py: its ``settings_module``), found through the registry so this module names no
protocol. Shared by the create path (project_setup.py), the settings pages (project_edit.py) and
the admin's project form (project_settings_check, which also refuses keys nothing reads); readers
go through ``project_setting``, which applies the key's check to what is stored.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocols import registry

from .disagreement import THRESHOLDS_OF_WORKFLOW, thresholds_clean
from .models import WORKFLOW_OF_PROTOCOL, Workflow
from .protocols import rating_criteria

logger = logging.getLogger(__name__)

LEASE_RANGE = (60, 24 * 3600)
MAX_RUBRIC = 5000
MAX_CITATION = 5000
MAX_LICENSE = 100
MAX_STATE_LABEL = 2000  # as long as an imported box item's state may be (protocols/fields.py text)
DEFAULT_LEASE_SECONDS = 600  # a task's lease (queue/rules.py reads it from here)
MAX_ANNOTATOR_CAP = 1_000_000


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


def annotator_cap_clean(value: Any, errors: dict[str, str]) -> int | None:
    """annotator_cap, read by queue/claim.py (default none: no cap): how many answers one annotator
    may give in the project (every protocol; a crowd study has its own per-participant limits)."""
    return _whole(value, "annotator_cap", 1, MAX_ANNOTATOR_CAP, errors)


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


# Every shared key of Project.settings that the code reads (models.Project.settings documents them).
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
    "annotator_cap": SettingRule(annotator_cap_clean),
}


def protocol_setting_keys() -> tuple[str, ...]:
    """The keys registered protocols read and check themselves (Protocol.setting_check), in the
    registry's order."""
    out: list[str] = []
    for proto in registry.protocols():
        out += [k for k in proto.settings_keys if k not in out and k not in SETTING_RULES and proto.setting_check(k)]
    return tuple(out)


def setting_rule(key: Any) -> SettingRule | None:
    """The rule of one key: a shared one (SETTING_RULES) or a protocol's own (its check, read by
    the protocols listing the key); None for a key no code reads."""
    if key in SETTING_RULES:
        return SETTING_RULES[key]
    if not isinstance(key, str):
        return None
    for proto in registry.protocols():
        if (check := proto.setting_check(key)) is not None:
            return SettingRule(check, key=key)
    return None


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
    rule = setting_rule(key)
    if rule is None:
        raise KeyError(f"{key!r} is not a project setting")
    value = rule.clean(settings[key], errors)
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
        rule = setting_rule(key)
        if rule is None:
            known = ", ".join((*SETTING_RULES, *protocol_setting_keys()))
            errors[str(key)] = f"Not a project setting; the settings are {known}."
            continue
        if protocol not in rule.protocols:
            errors[key] = f"Only {', '.join(registry.get(p).label for p in rule.protocols)} projects read it."
            continue
        before = len(errors)
        value = rule.clean(value, errors, protocol=protocol) if rule.takes_protocol else rule.clean(value, errors)
        if len(errors) == before:
            clean[key] = value
    return clean, errors
