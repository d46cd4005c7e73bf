"""FindCoordinator: this broker coordinates every group (embedded mode); transactions are not served."""

from __future__ import annotations

from typing import Any

from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode

API_KEY = 10
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _lookup(key: str, key_type: int, ctx: BrokerContext) -> dict[str, Any]:
    if key_type == GROUP_KEY_TYPE:
        error = ctx.groups.partition_error(key, create=True)
        message = None if error == ErrorCode.NONE else "the group's __consumer_offsets partition is unavailable"
    elif key_type == TRANSACTION_KEY_TYPE:
        error, message = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactions are not supported"
    else:
        error, message = ErrorCode.INVALID_REQUEST, f"unsupported coordinator key type {key_type}"
    if error != ErrorCode.NONE:
        return {"key": key, "error_code": error, "error_message": message, "node_id": -1, "host": "", "port": -1}
    return {"key": key, "error_code": ErrorCode.NONE, "error_message": None, "node_id": ctx.broker_id,
            "host": ctx.host, "port": ctx.port}


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    body = request.body
    if request.api_version >= 4:
        return {"throttle_time_ms": 0,
                "coordinators": [_lookup(key, body.key_type, ctx) for key in body.coordinator_keys]}
    found = _lookup(body.key, body.key_type, ctx)
    del found["key"]
    return {"throttle_time_ms": 0, **found}
