"""mantle_admit plans its statements once per connection (SET plan_cache_mode =
force_generic_plan on the function). PL/pgSQL caches each statement's plan, but under the
default plan_cache_mode a statement with parameters is planned again for their values until a
generic plan looks no dearer, and for mantle_admit's statements that was every call: about a third
of the function's CPU. Measured with pgbench calling the function, 100 teams, 16 clients: its
backends' CPU per admission 1.19-1.43 ms -> 0.77-0.87 ms.

The function is 0016's, frozen there, with only its header changed
(tests/structure/test_migrations.py checks the result is what executions/sql builds now).
"""

import importlib

from django.db import migrations

PREVIOUS = importlib.import_module("executions.migrations.0016_admission_announced_after_commit")

_HEADER = "LANGUAGE plpgsql VOLATILE AS $admit$"
assert PREVIOUS.ADMIT_FUNCTION.count(_HEADER) == 1

ADMIT_FUNCTION = PREVIOUS.ADMIT_FUNCTION.replace(
    _HEADER,
    """LANGUAGE plpgsql VOLATILE
-- Generic plans, made once per connection: with PL/pgSQL's default, every statement here was
-- planned again on every call for its parameters' values, a third of the function's CPU.
SET plan_cache_mode = force_generic_plan
AS $admit$""",
)


class Migration(migrations.Migration):
    dependencies = [("executions", "0016_admission_announced_after_commit")]

    operations = [
        migrations.RunSQL(sql=ADMIT_FUNCTION, reverse_sql=PREVIOUS.ADMIT_FUNCTION),
    ]
