from django.urls import path

from . import apis, judges, rater_exclusion

urlpatterns = [
    path("projects/<slug:slug>/leaderboard/", apis.LeaderboardApi.as_view(), name="api-leaderboard"),
    path("projects/<slug:slug>/correlation/", apis.CorrelationApi.as_view(), name="api-correlation"),
    path("projects/<slug:slug>/power/", apis.PowerApi.as_view(), name="api-power"),
    path("projects/<slug:slug>/judges/", judges.JudgesApi.as_view(), name="api-judges"),
    path(
        "projects/<slug:slug>/raters/exclusions/",
        rater_exclusion.RaterExclusionApi.as_view(),
        name="api-rater-exclusions",
    ),
]
