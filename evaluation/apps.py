from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from inference.signals import job_finished

        from . import boards

        job_finished.connect(boards.on_job_finished, dispatch_uid="evaluation.warm_boards")
