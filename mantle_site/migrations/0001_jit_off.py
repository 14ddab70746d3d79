"""PostgreSQL's JIT off for every session of Mantle's database, whatever connects (a web or
worker process, a pooler's server connection: PgBouncer drops a client's start-up `options`).

Mantle's statements are short and run thousands of times a second; JIT compiles a statement
whose plan cost passes jit_above_cost, every time it runs. Promotion's read of a queue of 1,000
crossed it once the table was analyzed: 923 ms of compiling for 1 ms of execution.

A role that does not own the database cannot set it: the migration then warns and goes on (a
DBA can run the same ALTER DATABASE), since Mantle is correct either way, only slower.
"""

from django.db import migrations

JIT_OFF = """
DO $$
BEGIN
  -- This session too: a database's setting reaches only the sessions started after it, and the
  -- process that migrates may go on working on this connection (a test run, a benchmark).
  PERFORM set_config('jit', 'off', false);
  BEGIN
    EXECUTE format('ALTER DATABASE %I SET jit = off', current_database());
  EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'cannot set jit = off on database %: run ALTER DATABASE % SET jit = off as its owner',
      current_database(), current_database();
  END;
END $$
"""

JIT_DEFAULT = "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET jit', current_database()); END $$"


class Migration(migrations.Migration):
    operations = [migrations.RunSQL(JIT_OFF, reverse_sql=JIT_DEFAULT)]
