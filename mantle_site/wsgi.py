import os

from django.core.wsgi import get_wsgi_application

from mantle_site.chunked import read_chunked_bodies

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mantle_site.settings")
application = read_chunked_bodies(get_wsgi_application())
