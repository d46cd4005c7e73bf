"""ApiVersions: the versions of every API this broker speaks."""

from __future__ import annotations

from minikafka.server.context import BrokerContext
from protocol import SUPPORTED_APIS, Request
from protocol.errors import ErrorCode
from protocol.typed.api_versions import ApiVersionsRequestView, ApiVersionsResponse


async def handle(request: Request[ApiVersionsRequestView], ctx: BrokerContext) -> ApiVersionsResponse:
    return {
        "error_code": ErrorCode.NONE,
        "api_keys": [
            {"api_key": spec.key, "min_version": spec.min_version, "max_version": spec.max_version}
            for spec in sorted(SUPPORTED_APIS.values(), key=lambda s: s.key)
            if spec.key in ctx.handled_apis
        ],
        "throttle_time_ms": 0,
    }
