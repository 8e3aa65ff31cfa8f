"""A refused request is logged as one line, without a traceback (config/settings.py LOGGING): the
demo console shows no stack for a 403; a server error keeps its traceback."""

from __future__ import annotations

import logging
import sys

import pytest

pytestmark = pytest.mark.django_db


def test_a_403_is_logged_without_a_traceback(client, make_user, make_project, caplog):
    annotator = make_user("ann")
    make_project("p1", members={annotator: "annotator"})
    client.force_login(annotator)

    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get("/projects/p1/releases/")  # a researcher's page

    assert response.status_code == 403
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage() == "Forbidden (Permission denied): /projects/p1/releases/"
    assert record.exc_info is None and "Traceback" not in caplog.text


def test_only_a_refusal_loses_its_traceback():
    logger = logging.getLogger("django.request")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logger.makeRecord("django.request", logging.ERROR, __file__, 1, "Internal Server Error", (), None)
        record.exc_info = sys.exc_info()
    record.status_code = 500
    assert logger.filter(record) and record.exc_info is not None
    record.status_code = 403
    assert logger.filter(record) and record.exc_info is None
