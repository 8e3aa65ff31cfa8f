"""A protocol's own form may ask the server to check that an answer came after enough viewing: its
module's optional ``viewing_check`` hook (annotation/protocols.py, "A workflow of its own"). The
submit calls ``viewing_refusal`` with the time the server measured (the active time it stores
with the answer, queue/submit.py); a refusal raises ResultInvalid (a 400 naming the time seen and
the time required) and, inside the submit's transaction, leaves nothing written. This module
names no protocol."""

from __future__ import annotations

from typing import Any

from protocols import registry

from ..project_setup import project_setting
from ..protocols import custom_workflow
from ..results import ResultInvalid
from ..selectors import _media_field, media_urls_for, result_context_for
from .rules import lease_seconds


def viewing_refusal(*, item, user, result: Any, seconds: float) -> None:
    """Raise ResultInvalid when the item's form refuses ``result`` of ``user`` submitted
    ``seconds`` after the task was shown; nothing for a form without the hook."""
    project = item.project
    check = getattr(custom_workflow(project.workflow), "viewing_check", None)
    if check is None or getattr(item, "fill_fields", None):  # a labelling pass asks other fields
        return
    if seconds >= lease_seconds(project):
        # The measured time stops at one lease (queue/sql.py): an annotator who spent all of it on
        # the task watched as long as the server can tell, whatever the form requires.
        return
    proto = registry.get(project.protocol)
    settings = {key: project_setting(project.settings, key, None, project=project.slug) for key in proto.settings_keys}
    assets = media_urls_for(items=[item])
    media = {name: _media_field(item, name, assets) for name in proto.media_fields}
    context = result_context_for(item=item, annotator=user)
    errors = check(result, context, payload=item.payload or {}, media=media, settings=settings, seconds=seconds)
    if errors:
        raise ResultInvalid(errors)
