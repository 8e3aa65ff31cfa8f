"""Pages of the annotation app (mounted at /)."""

from django.urls import path, re_path

from .views import (
    account,
    amend,
    audit,
    fill_pass,
    home,
    imports,
    media,
    members,
    project_settings,
    releases,
    studies,
    work,
)

urlpatterns = [
    path("", home.home, name="home"),
    path("projects/new/", members.project_new, name="io-project-new"),  # before projects/<slug>/ ("new" is reserved)
    path("projects/<slug:slug>/members/", members.project_members, name="io-members"),
    path("projects/<slug:slug>/settings/", project_settings.project_settings, name="io-project-settings"),
    path("projects/<slug:slug>/settings/labelling-pass/", fill_pass.fill_pass_page, name="io-fill-pass"),
    path("invites/<str:token>/", members.invite_page, name="io-invite"),
    path("projects/<slug:slug>/my-work/<int:annotation_id>/", amend.amend, name="work-amend"),
    path("projects/<slug:slug>/", home.project_overview, name="io-project"),
    path("projects/<slug:slug>/import/", imports.project_import, name="io-import"),
    path("projects/<slug:slug>/imports/<int:run_id>/", imports.import_run_page, name="io-import-run"),
    path("projects/<slug:slug>/releases/", releases.project_releases, name="io-releases"),
    path(
        "projects/<slug:slug>/releases/<str:version>/download/", releases.release_download, name="io-release-download"
    ),
    path("projects/<slug:slug>/annotate/", work.annotate, name="work-annotate"),
    path("projects/<slug:slug>/review/", work.review_list, name="work-review-list"),
    path("projects/<slug:slug>/review/<int:item_id>/", work.review_detail, name="work-review-detail"),
    path("projects/<slug:slug>/agreement/", work.agreement, name="work-agreement"),
    path("projects/<slug:slug>/audit/", audit.project_audit, name="io-audit"),
    path("projects/<slug:slug>/studies/", studies.project_studies, name="io-studies"),
    path("projects/<slug:slug>/studies/<int:study_id>/", studies.study_detail, name="io-study"),
    path("projects/<slug:slug>/studies/<int:study_id>/participants.csv", studies.study_csv, name="io-study-csv"),
    # The public study link: anonymous by design (the crowd platform's id signs the participant in).
    path("study/<str:token>/", studies.study_entry, name="study-entry"),
    path("study/<str:token>/done/", studies.study_finish, name="study-finish"),
    path("accounts/logout/", account.LogoutView.as_view(), name="logout"),  # also revokes the user's API tokens
    # Media are served by Django only to signed-in users; production puts them on object storage.
    re_path(r"^media/(?P<path>.*)$", media.serve_media, name="media"),
]
