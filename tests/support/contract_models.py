"""Metadata models of the agent-contract tests (tests/unit/test_agent_contract.py and
tests/integration/test_agent_contract_http.py): a private and a public shape per pair, so a
test can tell which of them a contract carries."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["Empty", "RunPrivate", "RunPublic", "ThreadPrivate", "ThreadPublic"]


class RunPrivate(BaseModel):
    evaluation_job_id: str | None = None


class RunPublic(BaseModel):
    rating: str | None = None


class ThreadPrivate(BaseModel):
    crm_ticket_ref: str | None = None


class ThreadPublic(BaseModel):
    topic: str = ""


class Empty(BaseModel):
    pass
