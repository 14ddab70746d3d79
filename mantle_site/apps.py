from django.apps import AppConfig


class MantleSiteConfig(AppConfig):
    """The project itself, as an app for its `mantle serve` command."""

    name = "mantle_site"
