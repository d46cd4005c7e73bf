"""ListTransactions: the transactional ids this broker coordinates, filtered by state, producer
id, how long their transaction has been open (v1) and a pattern on the id (v2)."""

from __future__ import annotations

import re

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_transactional_id
from minikafka.txn.state import TxnState
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.list_transactions import ListTransactionsRequestView, ListTransactionsResponse

_STATES = {state.display_name: state for state in TxnState}


async def handle(request: Request[ListTransactionsRequestView], ctx: BrokerContext
                 ) -> ListTransactionsResponse:
    body = request.body
    version = request.api_version
    unknown = [name for name in body.state_filters if name not in _STATES]
    pattern = body.transactional_id_pattern if version >= 2 else None
    try:
        matcher = re.compile(pattern) if pattern else None
    except re.error:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REGULAR_EXPRESSION,
                "unknown_state_filters": [], "transaction_states": []}
    states = {_STATES[name] for name in body.state_filters if name in _STATES}
    if body.state_filters and not states:  # only states nobody can be in
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": unknown,
                "transaction_states": []}
    found = ctx.txns.list(states, set(body.producer_id_filters), body.duration_filter if version >= 1 else -1)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": unknown,
            "transaction_states": [
                {"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                 "transaction_state": m.state.display_name}
                for m in sorted(found, key=lambda m: m.transactional_id)
                if (matcher is None or matcher.fullmatch(m.transactional_id))
                and may_on_transactional_id(ctx, AclOperation.DESCRIBE, m.transactional_id)]}
