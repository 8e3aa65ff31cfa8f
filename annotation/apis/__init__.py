"""The annotation app's REST API (DRF), one module per area; routes in annotation/api_urls.py.

projects   the signed-in user, their projects, a project's overview
imports    item and annotation imports (queued to a worker) and their runs
releases   list, freeze and export releases
work       the annotator's tasks (next, draft, renew, submit, skip), review and agreement
audit      a project's audit trail (researchers): filtered, paged, exported
members    a project's members (add, CSV, change, remove), invite links and joining by one
amend      an annotator's own recent annotations and amending one (not yet reviewed)
project_settings  a project's disagreement thresholds (researchers)
"""
