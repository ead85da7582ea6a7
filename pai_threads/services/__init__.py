"""The thread service: the trusted operations behind the HTTP API, commands and admin.

One module per job: :mod:`.threads` (create, rename, archive, delete, reads),
:mod:`.sending` (a user message and the send policies), :mod:`.cancelling`,
:mod:`.actions` (answering pending actions), :mod:`.regenerating`, :mod:`.triggers` and
:mod:`.commands` (agent commands).
Every function takes the caller's :class:`Identity` and filters by its ``scope_key``; a
thread of another scope raises :class:`NotFound` exactly like a missing one.
"""

from pai_threads.services.actions import (
    AnswerInvalid,
    PendingActionView,
    answered_message,
    fulfil_action,
    get_pending_action,
    list_actions,
    submit_action,
)
from pai_threads.services.cancelling import cancel_run
from pai_threads.services.commands import (
    CommandFailed,
    CommandInputInvalid,
    CommandResult,
    ainvoke_command,
    invoke_command,
)
from pai_threads.services.regenerating import regenerate
from pai_threads.services.sending import SEND_POLICIES, SendResult, send
from pai_threads.services.threads import (
    MAX_TITLE,
    Page,
    create_thread,
    delete_thread,
    get_run,
    get_thread,
    list_messages,
    list_queue,
    list_threads,
    rename_thread,
    set_archived,
)
from pai_threads.services.triggers import trigger
from pai_threads.store.rewrites import update_visibility

__all__ = [
    "MAX_TITLE",
    "SEND_POLICIES",
    "AnswerInvalid",
    "CommandFailed",
    "CommandInputInvalid",
    "CommandResult",
    "Page",
    "PendingActionView",
    "SendResult",
    "ainvoke_command",
    "answered_message",
    "cancel_run",
    "create_thread",
    "delete_thread",
    "fulfil_action",
    "get_pending_action",
    "get_run",
    "get_thread",
    "invoke_command",
    "list_actions",
    "list_messages",
    "list_queue",
    "list_threads",
    "regenerate",
    "rename_thread",
    "send",
    "set_archived",
    "submit_action",
    "trigger",
    "update_visibility",
]
