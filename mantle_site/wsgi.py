import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from mantle_site.chunked import read_chunked_bodies

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mantle_site.settings")
application = read_chunked_bodies(get_wsgi_application())


def _load_routes() -> None:
    """The URLconf (with every view module it imports) and its reverse map, which Django loads at
    a process's first request: loaded here, in gunicorn's master (preload_app), every web worker
    forks with them. In each worker they were a tenth of the web workers' CPU in a 2,000-request
    run, all of it in the first requests (docs/performance.md, figure 6)."""
    from api.base import executions_path

    get_resolver().url_patterns  # noqa: B018 (imports the URLconf)
    executions_path()  # the reverse map, and the path every admission's Location starts with


_load_routes()
