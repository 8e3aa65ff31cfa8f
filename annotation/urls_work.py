from django.urls import path

from . import views_work

urlpatterns = [
    path("projects/<slug:slug>/annotate/", views_work.annotate, name="work-annotate"),
    path("projects/<slug:slug>/review/", views_work.review_list, name="work-review-list"),
    path("projects/<slug:slug>/review/<int:item_id>/", views_work.review_detail, name="work-review-detail"),
    path("projects/<slug:slug>/agreement/", views_work.agreement, name="work-agreement"),
]
