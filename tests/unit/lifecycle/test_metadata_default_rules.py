"""AD-032 at the schema pair: every ``initial()`` is a new parse of ``{}``.

The run-level twin on both stores is in tests/integration/test_rule_strengthening.py.
"""

from __future__ import annotations

from pai_agents.lifecycle import MetadataSchemas
from tests.support.keyed_metadata import Empty, Keyed


def test_ad_032_each_initial_bag_runs_the_default_factories_again() -> None:
    """AD-032: two initial bags of one pair carry different factory values and their own
    lists; a parse cached at registration and deep-copied per run would repeat the key."""
    pair = MetadataSchemas(private=Keyed, public=Empty)
    first, second = pair.initial(), pair.initial()
    assert first.private["key"] != second.private["key"]
    assert first.private["seen"] == second.private["seen"] == []
    assert first.private["seen"] is not second.private["seen"]
