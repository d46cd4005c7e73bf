"""AlterConfigs and IncrementalAlterConfigs: dynamic configs of topics and of the broker.

AlterConfigs replaces a resource's whole set of dynamic configs; IncrementalAlterConfigs
sets, deletes, appends to or subtracts from single keys. Either way the resulting set is
validated as a whole, and a resource with any bad key or value changes nothing (for a topic
INVALID_CONFIG naming the key; for a broker INVALID_REQUEST, as Kafka answers). Broker configs
are per broker (resource name = broker id) or cluster-wide defaults (empty resource name); the
keys Kafka updates at run time and custom keys may be set (config.check_dynamic_configs).
"""

from __future__ import annotations

from minikafka.config import DEFINITIONS, ConfigType, config_type_of, format_value
from minikafka.kafka_broker_keys import KAFKA_DYNAMIC_UNDEFINED
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_topic
from minikafka.topic_config import TOPIC_CONFIGS, topic_config_value
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.alter_configs import (
    AlterConfigsRequestView,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from protocol.typed.incremental_alter_configs import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from protocol.typed.incremental_alter_configs import (
    IncrementalAlterConfigsRequestView,
    IncrementalAlterConfigsResponse,
)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Result = tuple[ErrorCode, str | None]
# One change to a resource's configs: (key, operation, value); AlterConfigs' entries are SETs.
Change = tuple[str, int, str | None]


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


def _is_list(resource_type: int, key: str) -> bool:
    if resource_type == TOPIC_RESOURCE:
        return key in TOPIC_CONFIGS and TOPIC_CONFIGS[key].kind == ConfigType.LIST
    definition = DEFINITIONS.get(key)
    if definition is None:
        return key in KAFKA_DYNAMIC_UNDEFINED and KAFKA_DYNAMIC_UNDEFINED[key][0] == "LIST"
    return config_type_of(definition) == ConfigType.LIST


def _current_list(resource_type: int, key: str, configs: dict[str, str], ctx: BrokerContext) -> list[str]:
    if key in configs:
        text = configs[key]
    elif resource_type == TOPIC_RESOURCE:
        text = format_value(topic_config_value(key, {}, ctx.config)[0]) or ""
    else:
        dynamic = ctx.config.dynamic_text(key)
        if dynamic is not None:
            text = dynamic[0] or ""
        elif key in DEFINITIONS:
            text = format_value(ctx.config[key]) or ""
        else:
            text = KAFKA_DYNAMIC_UNDEFINED[key][1] or ""
    return [item.strip() for item in text.split(",") if item.strip()]


def _apply(resource_type: int, configs: dict[str, str], changes: list[Change], ctx: BrokerContext) -> None:
    known = TOPIC_CONFIGS if resource_type == TOPIC_RESOURCE else {**DEFINITIONS, **KAFKA_DYNAMIC_UNDEFINED}
    for key, op, value in changes:
        if op == SET:
            if value is None:
                raise _Refused(ErrorCode.INVALID_CONFIG, f"Null value not supported for {key}")
            configs[key] = value
        elif op == DELETE:
            configs.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            if key not in known:
                raise _Refused(ErrorCode.INVALID_CONFIG, f"Unknown config name: {key}")
            if not _is_list(resource_type, key):
                verb = "append" if op == APPEND else "subtract"
                raise _Refused(ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {key}")
            items = _current_list(resource_type, key, configs, ctx)
            given = [item.strip() for item in (value or "").split(",") if item.strip()]
            if op == APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            configs[key] = ",".join(items)
        else:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {key}")


async def _alter(resource_type: int, name: str, changes: list[Change], incremental: bool, validate_only: bool,
                 ctx: BrokerContext) -> Result:
    names = [key for key, _, _ in changes]
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    if resource_type == TOPIC_RESOURCE and not may_on_topic(ctx, AclOperation.ALTER_CONFIGS, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    if resource_type == BROKER_RESOURCE and not ctx.session.allowed_on_cluster(AclOperation.ALTER_CONFIGS):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed."
    if resource_type == TOPIC_RESOURCE:
        topic_configs = await ctx.controller.topic_configs(name)
        if topic_configs is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
        configs = dict(topic_configs) if incremental else {}
        try:
            _apply(TOPIC_RESOURCE, configs, changes, ctx)
        except _Refused as exc:
            return exc.error, str(exc)
        return await ctx.controller.alter_topic_configs(name, configs, validate_only)
    if resource_type == BROKER_RESOURCE:
        if name not in ("", str(ctx.broker_id)):
            return ErrorCode.INVALID_REQUEST, (f"Unexpected broker id, expected {ctx.broker_id} or empty string, "
                                               f"but received {name}")
        configs = dict((await ctx.controller.broker_configs()).get(name, {})) if incremental else {}
        try:
            _apply(BROKER_RESOURCE, configs, changes, ctx)
        except _Refused as exc:
            return exc.error, str(exc)
        return await ctx.controller.alter_broker_configs(name, configs, validate_only)
    return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}"


async def alter(request: Request[AlterConfigsRequestView], ctx: BrokerContext) -> AlterConfigsResponse:
    """AlterConfigs: each resource's configs become the ones given."""
    body = request.body
    responses: list[AlterConfigsResourceResponse] = []
    for resource in body.resources:
        changes: list[Change] = [(c.name, SET, c.value) for c in resource.configs]
        error, message = await _alter(resource.resource_type, resource.resource_name, changes, False,
                                      body.validate_only, ctx)
        responses.append({"error_code": error, "error_message": message,
                          "resource_type": resource.resource_type, "resource_name": resource.resource_name})
    return {"throttle_time_ms": 0, "responses": responses}


async def incremental_alter(request: Request[IncrementalAlterConfigsRequestView], ctx: BrokerContext
                            ) -> IncrementalAlterConfigsResponse:
    """IncrementalAlterConfigs: each resource's configs are set, deleted, appended to or subtracted from."""
    body = request.body
    responses: list[IncrementalResourceResponse] = []
    for resource in body.resources:
        changes: list[Change] = [(c.name, c.config_operation, c.value) for c in resource.configs]
        error, message = await _alter(resource.resource_type, resource.resource_name, changes, True,
                                      body.validate_only, ctx)
        responses.append({"error_code": error, "error_message": message,
                          "resource_type": resource.resource_type, "resource_name": resource.resource_name})
    return {"throttle_time_ms": 0, "responses": responses}
