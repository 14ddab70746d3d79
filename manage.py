#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mantle_site.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except KeyboardInterrupt:  # Ctrl-C (make run's collectstatic): a line, not a traceback
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
