"""The annotation app's server-rendered pages, one module per area; routes in annotation/urls.py.

home       the home page and a project's overview
imports    the upload form and an import run
releases   freeze, list and download releases
work       the annotate, review and agreement pages
"""
