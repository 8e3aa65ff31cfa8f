"""The admin app with StateLab's site as `admin.site` (annotation/admin_site.py says who it lets in).

Named in INSTALLED_APPS in place of "django.contrib.admin", so every registration, Django's and
the third-party apps' included, lands on the one site that `config/urls.py` serves."""

from django.contrib.admin.apps import AdminConfig


class StateLabAdminConfig(AdminConfig):
    default_site = "annotation.admin_site.StateLabAdminSite"
