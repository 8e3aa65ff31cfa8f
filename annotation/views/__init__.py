"""The annotation app's server-rendered pages, one module per area; routes in annotation/urls.py.

home       the home page and a project's overview
imports    the upload form and an import run
releases   freeze, list and download releases
work       the annotate, review and agreement pages
audit      a project's audit trail
members    a new project, a project's members page, an invite link's page
amend      amending one's own earlier annotation (the workflow page in amend mode)
project_settings  a project's settings page (its disagreement thresholds)
studies    crowd studies, their participants, the public study link
account    signing out (which revokes the user's API tokens)
media      /media/: uploaded media to who may see them (annotation/media/access.py), with Range
"""
