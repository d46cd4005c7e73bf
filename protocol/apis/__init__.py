"""One module per Kafka API, each declaring `API`, an `ApiDefinition`.

Adding an API is adding a module here: `all_apis()` imports every module of this
package and collects their `API`s, so nothing else needs to list them. A module is
Kafka's JSON message definition written in `protocol.schema`'s terms, names in
snake_case, e.g.:

    API = ApiDefinition(
        key=29, name="DescribeAcls", versions="1-3", flexible="2+",
        request=[Field("resource_type_filter", "int8", "0+"), ...],
        response=[
            Field("throttle_time_ms", "int32", "0+"),
            Field("resources", "[]DescribeAclsResource", "0+", fields=[
                Field("name", "string", "0+"),
                Field("pattern_type", "int8", "1+", default=3),
            ]),
        ],
    )

tests/unit/protocol checks every module against Kafka's definitions shipped with
kafka-python and against kafka-python's encoder, for every version; tests/interop
against the definitions inside Apache Kafka's own jars (3.9 and 4.x) and the bytes
Kafka's generated message classes write.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..schema import ApiDefinition


def all_apis() -> list[ApiDefinition]:
    """Every API defined in this package, in API key order."""
    apis = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        api = getattr(module, "API", None)
        if isinstance(api, ApiDefinition):
            apis.append(api)
    apis.sort(key=lambda api: api.key)
    keys = [api.key for api in apis]
    if len(set(keys)) != len(keys):
        raise ValueError(f"two API modules declare the same API key: {keys}")
    return apis
