from django.urls import path

from . import judges, views

app_name = "evaluation"

urlpatterns = [
    path("projects/<slug:slug>/leaderboard/", views.leaderboard_page, name="leaderboard"),
    path(
        "projects/<slug:slug>/leaderboard/download/<str:fmt>/", views.leaderboard_download, name="leaderboard-download"
    ),
    path("projects/<slug:slug>/correlation/", views.correlation_page, name="correlation"),
    path("projects/<slug:slug>/power/", views.power_page, name="power"),
    path("projects/<slug:slug>/judges/", judges.judges_page, name="judges"),
    path(
        "projects/<slug:slug>/correlation/download/<str:fmt>/", views.correlation_download, name="correlation-download"
    ),
]
