from django.urls import path

from . import apis

urlpatterns = [
    path("projects/<slug:slug>/leaderboard/", apis.LeaderboardApi.as_view(), name="api-leaderboard"),
    path("projects/<slug:slug>/correlation/", apis.CorrelationApi.as_view(), name="api-correlation"),
]
