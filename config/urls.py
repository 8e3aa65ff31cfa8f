from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from config.health import healthz

# A database or Redis outage raised outside a view: 503, not 500 (config/unavailable.py).
handler500 = "config.unavailable.server_error"

urlpatterns = [
    path("healthz", healthz, name="healthz"),  # database, Redis, live workers per queue (no sign-in)
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("api/", include("annotation.api_urls")),
    path("api/", include("inference.api_urls")),
    path("api/", include("evaluation.api_urls")),
    path("", include("inference.urls")),
    path("", include("evaluation.urls")),
    # The annotation app's pages, sign-out (which revokes API tokens) and /media/ (signed-in users only).
    path("", include("annotation.urls")),
]
