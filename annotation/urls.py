from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("annotation.urls_io")),
    path("", include("annotation.urls_work")),
]
