"""WSGI entry point (the demo normally runs on ASGI under daphne)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pai_project.settings")

application = get_wsgi_application()
