"""The annotation app's REST API (DRF), one module per area; routes in annotation/api_urls.py.

projects   the signed-in user, their projects, a project's overview
imports    item and annotation imports (queued to a worker) and their runs
releases   list, freeze and export releases
work       the annotator's tasks (next, draft, renew, submit, skip), review and agreement
"""
