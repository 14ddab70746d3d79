from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"

    def ready(self) -> None:
        from executions import signals  # noqa: F401  (connects the receivers: the entries to promotion)
