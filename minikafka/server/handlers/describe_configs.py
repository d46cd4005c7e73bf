"""DescribeConfigs: topic and broker configuration values with their sources."""

from __future__ import annotations

from typing import Any

from minikafka.config import DEFINITIONS, ConfigSource, config_type_of, format_value
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_topic
from minikafka.topic_config import TOPIC_CONFIGS, describe_topic_config
from protocol import Request
from protocol.errors import ErrorCode

API_KEY = 32
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    include_synonyms = request.body.include_synonyms
    results = []
    for resource in request.body.resources:
        keys = resource.configuration_keys
        result: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None,
                                  "resource_type": resource.resource_type, "resource_name": resource.resource_name,
                                  "configs": []}
        if resource.resource_type == TOPIC_RESOURCE \
                and not may_on_topic(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_name):
            result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message="Authorization failed.")
        elif resource.resource_type == BROKER_RESOURCE \
                and not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE_CONFIGS):
            result.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Authorization failed.")
        elif resource.resource_type == TOPIC_RESOURCE:
            topic_configs = await ctx.controller.topic_configs(resource.resource_name)
            if topic_configs is None:
                result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=f"Topic {resource.resource_name} does not exist")
            else:
                result["configs"] = [_topic_entry(key, topic_configs, ctx, include_synonyms)
                                     for key in TOPIC_CONFIGS if keys is None or key in keys]
        elif resource.resource_type == BROKER_RESOURCE:
            if resource.resource_name not in ("", str(ctx.broker_id)):
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message=f"Unexpected broker id, expected {ctx.broker_id} or empty string, "
                                            f"but received {resource.resource_name}")
            elif resource.resource_name == "":
                # The cluster-default entity holds only the dynamic defaults that were set.
                result["configs"] = [_cluster_default_entry(name, ctx, include_synonyms)
                                     for name in ctx.config.dynamic_default if keys is None or name in keys]
            else:
                result["configs"] = [_broker_entry(name, ctx, include_synonyms)
                                     for name in DEFINITIONS if keys is None or name in keys]
        else:
            result.update(error_code=ErrorCode.INVALID_REQUEST,
                          error_message=f"Unsupported resource type {resource.resource_type}")
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


def _shown(name: str, value: str | None) -> str | None:
    """A secret (a password, a private key) is never shown: null, as Kafka answers."""
    return None if DEFINITIONS[name].sensitive else value


def _broker_synonyms(name: str, ctx: BrokerContext) -> list[dict[str, Any]]:
    """Every value a broker key has, most to least precedent (Kafka's synonym order)."""
    config = ctx.config
    found = []
    if name in config.dynamic_broker:
        found.append((format_value(config.dynamic_broker[name]), ConfigSource.DYNAMIC_BROKER_CONFIG))
    if name in config.dynamic_default:
        found.append((format_value(config.dynamic_default[name]), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    if name in config.explicit:
        found.append((format_value(config.values[name]), ConfigSource.STATIC_BROKER_CONFIG))
    found.append((format_value(DEFINITIONS[name].default), ConfigSource.DEFAULT_CONFIG))
    return [{"name": name, "value": _shown(name, value), "source": source} for value, source in found]


def _topic_entry(key: str, topic_configs: dict[str, str], ctx: BrokerContext, synonyms: bool) -> dict[str, Any]:
    value, source = describe_topic_config(key, topic_configs, ctx.config)
    definition = TOPIC_CONFIGS[key]
    entry: dict[str, Any] = {"name": key, "value": value, "read_only": False, "config_source": source,
                             "is_default": source == ConfigSource.DEFAULT_CONFIG, "is_sensitive": False,
                             "config_type": definition.kind, "synonyms": []}
    if synonyms:
        if source == ConfigSource.DYNAMIC_TOPIC_CONFIG:
            entry["synonyms"].append({"name": key, "value": value, "source": source})
        if definition.broker_key is not None:
            entry["synonyms"] += _broker_synonyms(definition.broker_key, ctx)
    return entry


def _broker_entry(name: str, ctx: BrokerContext, synonyms: bool) -> dict[str, Any]:
    definition = DEFINITIONS[name]
    value = _shown(name, format_value(ctx.config[name]))
    source = ctx.config.source_of(name)
    entry: dict[str, Any] = {"name": name, "value": value, "read_only": not definition.dynamic,
                             "config_source": source, "is_default": source == ConfigSource.DEFAULT_CONFIG,
                             "is_sensitive": definition.sensitive, "config_type": config_type_of(definition), "synonyms": [],
                             "documentation": definition.doc}
    if synonyms:
        entry["synonyms"] = _broker_synonyms(name, ctx)
    return entry


def _cluster_default_entry(name: str, ctx: BrokerContext, synonyms: bool) -> dict[str, Any]:
    """The cluster-wide dynamic default of a key (DescribeConfigs of the broker resource "")."""
    definition = DEFINITIONS[name]
    value = format_value(ctx.config.dynamic_default[name])
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    entry: dict[str, Any] = {"name": name, "value": value, "read_only": False, "config_source": source,
                             "is_default": False, "is_sensitive": False, "config_type": config_type_of(definition),
                             "synonyms": [], "documentation": definition.doc}
    if synonyms:
        entry["synonyms"] = [{"name": name, "value": value, "source": source}]
    return entry
