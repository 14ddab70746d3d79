from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "engine"

    def ready(self) -> None:
        from engine.actions import actions_register

        actions_register()
