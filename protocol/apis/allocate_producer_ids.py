"""AllocateProducerIds (key 67, KIP-730): a broker asks the controller for a block of
producer ids, instead of claiming one in ZooKeeper itself (Kafka brokers from
inter.broker.protocol.version 3.0-IV0)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=67,
    name="AllocateProducerIds",
    versions="0",
    flexible="0+",
    request=[
        Field("broker_id", "int32", "0+"),
        Field("broker_epoch", "int64", "0+", default=-1),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("producer_id_start", "int64", "0+"),
        Field("producer_id_len", "int32", "0+"),
    ],
)
