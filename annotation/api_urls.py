"""REST API of the annotation app (mounted at /api/)."""

from django.urls import path

from .apis import amend, audit, fill_pass, imports, members, project_settings, projects, releases, studies, work

urlpatterns = [
    path("me/", projects.MeApi.as_view(), name="api-me"),
    path("projects/", projects.ProjectListApi.as_view(), name="api-projects"),
    path("projects/<slug:slug>/overview/", projects.ProjectOverviewApi.as_view(), name="api-project-overview"),
    path(
        "projects/<slug:slug>/settings/disagreement/",
        project_settings.ProjectThresholdsApi.as_view(),
        name="api-project-thresholds",
    ),
    path("projects/<slug:slug>/fill-pass/", fill_pass.FillPassApi.as_view(), name="api-fill-pass"),
    path("projects/<slug:slug>/members/", members.MemberListApi.as_view(), name="api-members"),
    path("projects/<slug:slug>/members/csv/", members.MemberCsvApi.as_view(), name="api-members-csv"),
    path("projects/<slug:slug>/members/<int:user_id>/", members.MemberApi.as_view(), name="api-member"),
    path("projects/<slug:slug>/invites/", members.InviteListApi.as_view(), name="api-invites"),
    path(
        "projects/<slug:slug>/invites/<int:invite_id>/revoke/",
        members.InviteRevokeApi.as_view(),
        name="api-invite-revoke",
    ),
    path("invites/<str:token>/accept/", members.InviteAcceptApi.as_view(), name="api-invite-accept"),
    path("projects/<slug:slug>/my-annotations/", amend.OwnRecentApi.as_view(), name="api-own-annotations"),
    path("annotations/<int:annotation_id>/", amend.OwnAnnotationApi.as_view(), name="api-own-annotation"),
    path("annotations/<int:annotation_id>/amend/", amend.AmendApi.as_view(), name="api-annotation-amend"),
    path("projects/<slug:slug>/imports/", imports.ItemImportApi.as_view(), name="api-item-import"),
    path(
        "projects/<slug:slug>/imports/formats/", imports.ItemImportFormatsApi.as_view(), name="api-item-import-formats"
    ),
    path("imports/<int:run_id>/", imports.ImportRunApi.as_view(), name="api-import-run"),
    path(
        "projects/<slug:slug>/annotation-imports/", imports.AnnotationImportApi.as_view(), name="api-annotation-import"
    ),
    path("projects/<slug:slug>/releases/", releases.ReleaseListApi.as_view(), name="api-releases"),
    path(
        "projects/<slug:slug>/releases/<str:version>/export/",
        releases.ReleaseExportApi.as_view(),
        name="api-release-export",
    ),
    path("projects/<slug:slug>/tasks/next/", work.TaskNextApi.as_view(), name="api-task-next"),
    path("tasks/<int:task_id>/draft/", work.TaskDraftApi.as_view(), name="api-task-draft"),
    path("tasks/<int:task_id>/renew/", work.TaskRenewApi.as_view(), name="api-task-renew"),
    path("tasks/<int:task_id>/submit/", work.TaskSubmitApi.as_view(), name="api-task-submit"),
    path("tasks/<int:task_id>/skip/", work.TaskSkipApi.as_view(), name="api-task-skip"),
    path("projects/<slug:slug>/review/", work.ReviewQueueApi.as_view(), name="api-review-queue"),
    path("items/<int:item_id>/review/", work.ItemReviewApi.as_view(), name="api-item-review"),
    path("projects/<slug:slug>/agreement/", work.AgreementApi.as_view(), name="api-agreement"),
    path("projects/<slug:slug>/audit/", audit.AuditListApi.as_view(), name="api-audit"),
    path("projects/<slug:slug>/studies/", studies.StudyListApi.as_view(), name="api-studies"),
    path("projects/<slug:slug>/studies/<int:study_id>/", studies.StudyDetailApi.as_view(), name="api-study"),
    path("projects/<slug:slug>/studies/<int:study_id>/close/", studies.StudyCloseApi.as_view(), name="api-study-close"),
    path(
        "projects/<slug:slug>/studies/<int:study_id>/participants/<int:participant_id>/decision/",
        studies.ParticipantDecisionApi.as_view(),
        name="api-study-decision",
    ),
    path("projects/<slug:slug>/audit/export/", audit.AuditExportApi.as_view(), name="api-audit-export"),
]
