"""Sub-agent runs on the Django side (docs/subagents.md): starting a child run in the
transaction that makes its parent wait, and answering the parent's call in the transaction
that ends the child."""

from pai_threads.subagents.children import start_children
from pai_threads.subagents.outcomes import answer_parent, child_outcome
from pai_threads.subagents.progress import child_progressed

__all__ = ["answer_parent", "child_outcome", "child_progressed", "start_children"]
