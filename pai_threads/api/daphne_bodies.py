"""daphne: hand request bodies to Django unparsed.

Under daphne, Twisted parses every multipart and urlencoded POST body itself before the
ASGI application sees it (into ``request.args``, which daphne never uses). A body it cannot
parse (multipart without a boundary, or with nothing but the closing boundary) it answers
with a bare ``400`` and closes the connection: no JSON, and the API never gets to answer in
its envelope. It also keeps a parsed copy of each upload in memory. Django parses the body
again anyway, so :func:`defer_body_parsing_to_django` turns Twisted's parsing off.
"""

from __future__ import annotations

from typing import Any

__all__ = ["defer_body_parsing_to_django"]


def defer_body_parsing_to_django() -> bool:
    """Make daphne's HTTP requests skip Twisted's form parsing (Twisted's public
    ``parsePOSTFormSubmission=False``). Idempotent; False when daphne is not installed.
    Call it before the server accepts connections (e.g. when building the ASGI app)."""
    try:
        from daphne import http_protocol
    except ImportError:
        return False
    base = http_protocol.WebRequest
    if getattr(base, "pai_unparsed_bodies", False):
        return True

    class UnparsedBodyRequest(base):  # type: ignore[misc, valid-type]
        pai_unparsed_bodies = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["parsePOSTFormSubmission"] = False
            super().__init__(*args, **kwargs)

    # HTTPFactory.buildProtocol installs ``WebRequest`` from this module's namespace.
    http_protocol.WebRequest = UnparsedBodyRequest
    return True
