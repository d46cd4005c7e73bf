"""DescribeConfigs: topic and broker configuration values with their sources."""

from __future__ import annotations

from minikafka.config import (
    DEFINITIONS,
    ConfigSource,
    ConfigType,
    config_type_of,
    format_value,
    updatable_dynamically,
)
from minikafka.kafka_broker_keys import KAFKA_DYNAMIC_UNDEFINED
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_topic
from minikafka.topic_config import TOPIC_CONFIGS, describe_topic_config
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.describe_configs import (
    DescribeConfigsRequestView,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8


async def handle(request: Request[DescribeConfigsRequestView], ctx: BrokerContext) -> DescribeConfigsResponse:
    include_synonyms = request.body.include_synonyms
    results: list[DescribeConfigsResult] = []
    for resource in request.body.resources:
        keys = resource.configuration_keys
        result: DescribeConfigsResult = {"error_code": ErrorCode.NONE, "error_message": None,
                                  "resource_type": resource.resource_type, "resource_name": resource.resource_name,
                                  "configs": []}
        if resource.resource_type == TOPIC_RESOURCE \
                and not may_on_topic(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_name):
            _refuse(result, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        elif resource.resource_type == BROKER_RESOURCE \
                and not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE_CONFIGS):
            _refuse(result, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")
        elif resource.resource_type == TOPIC_RESOURCE:
            topic_configs = await ctx.controller.topic_configs(resource.resource_name)
            if topic_configs is None:
                _refuse(result, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist")
            else:
                result["configs"] = [_topic_entry(key, topic_configs, ctx, include_synonyms)
                                     for key in TOPIC_CONFIGS if keys is None or key in keys]
        elif resource.resource_type == BROKER_RESOURCE:
            if resource.resource_name not in ("", str(ctx.broker_id)):
                _refuse(result, ErrorCode.INVALID_REQUEST,
                        f"Unexpected broker id, expected {ctx.broker_id} or empty string, "
                        f"but received {resource.resource_name}")
            elif resource.resource_name == "":
                # The cluster-default entity holds only the dynamic defaults that were set.
                config = ctx.config
                result["configs"] = [_cluster_default_entry(name, ctx, include_synonyms)
                                     for name in [*config.dynamic_default, *config.stored_default]
                                     if keys is None or name in keys]
            else:
                # minikafka's keys, Kafka's dynamic keys minikafka only stores, then the other keys
                # stored for this broker (custom and listener-prefixed ones), as Kafka lists them.
                config = ctx.config
                extra = [name for name in [*config.stored_broker, *config.stored_default]
                         if name not in DEFINITIONS and name not in KAFKA_DYNAMIC_UNDEFINED]
                result["configs"] = [_broker_entry(name, ctx, include_synonyms)
                                     for name in [*DEFINITIONS, *KAFKA_DYNAMIC_UNDEFINED, *dict.fromkeys(extra)]
                                     if keys is None or name in keys]
        else:
            _refuse(result, ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}")
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


def _refuse(result: DescribeConfigsResult, error: ErrorCode, message: str) -> None:
    result["error_code"], result["error_message"] = error, message


def _kind(name: str) -> int:
    """The type of a broker key; UNKNOWN for a custom or listener-prefixed one, as Kafka says."""
    if name in DEFINITIONS:
        return config_type_of(DEFINITIONS[name])
    if name in KAFKA_DYNAMIC_UNDEFINED:
        return ConfigType.named(KAFKA_DYNAMIC_UNDEFINED[name][0])
    return ConfigType.UNKNOWN


def _sensitive(name: str) -> bool:
    """A secret (a password, a private key), or a key whose type is unknown and so might be one:
    Kafka shows neither's value."""
    if name in DEFINITIONS:
        return DEFINITIONS[name].sensitive
    return _kind(name) in (ConfigType.PASSWORD, ConfigType.UNKNOWN)


def _shown(name: str, value: str | None) -> str | None:
    return None if _sensitive(name) else value


def _broker_synonyms(name: str, ctx: BrokerContext) -> list[DescribeConfigsSynonym]:
    """Every value a broker key has, most to least precedent (Kafka's synonym order)."""
    config = ctx.config
    found: list[tuple[str | None, int]] = []
    for applied, stored, source in ((config.dynamic_broker, config.stored_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                                    (config.dynamic_default, config.stored_default,
                                     ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
        if name in applied:
            found.append((format_value(applied[name]), source))
        elif name in stored:
            found.append((stored[name], source))
    if name in DEFINITIONS:
        if name in config.explicit:
            found.append((format_value(config.values[name]), ConfigSource.STATIC_BROKER_CONFIG))
        found.append((format_value(DEFINITIONS[name].default), ConfigSource.DEFAULT_CONFIG))
    elif name in KAFKA_DYNAMIC_UNDEFINED:
        found.append((KAFKA_DYNAMIC_UNDEFINED[name][1], ConfigSource.DEFAULT_CONFIG))
    return [{"name": name, "value": _shown(name, value), "source": source} for value, source in found]


def _topic_entry(key: str, topic_configs: dict[str, str], ctx: BrokerContext, synonyms: bool
                 ) -> DescribeConfigsResourceResult:
    value, source = describe_topic_config(key, topic_configs, ctx.config)
    definition = TOPIC_CONFIGS[key]
    found: list[DescribeConfigsSynonym] = []
    if synonyms:
        if source == ConfigSource.DYNAMIC_TOPIC_CONFIG:
            found.append({"name": key, "value": value, "source": source})
        if definition.broker_key is not None:
            found += _broker_synonyms(definition.broker_key, ctx)
    return {"name": key, "value": value, "read_only": False, "config_source": source,
            "is_default": source == ConfigSource.DEFAULT_CONFIG, "is_sensitive": False,
            "config_type": definition.kind, "synonyms": found}


def _broker_entry(name: str, ctx: BrokerContext, synonyms: bool) -> DescribeConfigsResourceResult:
    """One key of a broker: its dynamic value (applied or only stored) if it has one, else its
    static or default value."""
    dynamic = ctx.config.dynamic_text(name)
    if dynamic is not None:
        text, source = dynamic
    elif name in DEFINITIONS:
        text, source = format_value(ctx.config[name]), ctx.config.source_of(name)
    else:
        text, source = KAFKA_DYNAMIC_UNDEFINED[name][1], ConfigSource.DEFAULT_CONFIG
    definition = DEFINITIONS.get(name)
    entry: DescribeConfigsResourceResult = {
        "name": name, "value": _shown(name, text), "read_only": not _updatable(name),
        "config_source": source, "is_default": source == ConfigSource.DEFAULT_CONFIG,
        "is_sensitive": _sensitive(name), "config_type": _kind(name), "synonyms": [],
        "documentation": definition.doc if definition is not None else None}
    if synonyms:
        entry["synonyms"] = _broker_synonyms(name, ctx)
    return entry


def _updatable(name: str) -> bool:
    """Whether DescribeConfigs calls ``name`` changeable: a dynamic key of minikafka or of Kafka
    (a custom or listener-prefixed key is read-only to Kafka's DescribeConfigs)."""
    definition = DEFINITIONS.get(name)
    return name in KAFKA_DYNAMIC_UNDEFINED or (definition is not None and updatable_dynamically(name))


def _cluster_default_entry(name: str, ctx: BrokerContext, synonyms: bool) -> DescribeConfigsResourceResult:
    """The cluster-wide dynamic default of a key (DescribeConfigs of the broker resource "")."""
    config = ctx.config
    value = _shown(name, format_value(config.dynamic_default[name]) if name in config.dynamic_default
                   else config.stored_default[name])
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    definition = DEFINITIONS.get(name)
    entry: DescribeConfigsResourceResult = {
        "name": name, "value": value, "read_only": not _updatable(name), "config_source": source,
        "is_default": False, "is_sensitive": _sensitive(name), "config_type": _kind(name),
        "synonyms": [], "documentation": definition.doc if definition is not None else None}
    if synonyms:
        entry["synonyms"] = [{"name": name, "value": value, "source": source}]
    return entry
