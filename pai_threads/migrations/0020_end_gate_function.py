"""The end of a run in one autocommit statement on PostgreSQL (issue 16, W1).

A run's last step used to end in a transaction of four round trips: BEGIN, the thread lock
(``SELECT ... FOR UPDATE``), the step's data-modifying CTE, COMMIT. The lock is there so
that no send queues input between the moment the ending write looks for queued input and
its commit (the input would wait with no run to admit it). One statement cannot take that
lock and then read with a snapshot that includes what the lock waited for: in READ
COMMITTED a statement's snapshot is taken when it starts. A VOLATILE function's own
queries take fresh snapshots, though. ``pai_threads_end_gate`` is called in the fencing
UPDATE's WHERE clause (so before the run row is locked: thread, then run, the one lock
order): it takes the thread lock, then reads the queue anew, and is false (the UPDATE
matches no row, so nothing of the statement is stored) when there is input to admit or
when the run is a sub-agent's, whose end answers its parent: those end in the transaction
as before (:mod:`pai_threads.store.step_writes`). False, not an error: no ERROR line in the
server's log for an ordinary fallback.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION pai_threads_end_gate(thread text, queued text, parent text)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF parent IS NOT NULL THEN
        RETURN false;
    END IF;
    PERFORM 1 FROM pai_threads_thread WHERE id = thread FOR UPDATE;
    IF EXISTS (
        SELECT 1 FROM pai_threads_queueitem WHERE thread_id = thread AND status = queued
    ) THEN
        RETURN false;
    END IF;
    RETURN true;
END
$$
"""


def create_gate(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)


def drop_gate(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS pai_threads_end_gate(text, text, text)")


class Migration(migrations.Migration):
    dependencies = [("pai_threads", "0019_drop_thread_recent_index")]

    operations = [migrations.RunPython(create_gate, drop_gate)]
