"""The columns of the "minikafka" data source, the same as Spark's Kafka source.

`source_schema()` is the Spark schema of a read; `arrow_schema()` the Arrow schema the readers'
record batches must match exactly (Spark checks it). `check_sink_schema()` vets the columns of a
DataFrame about to be written and returns which optional columns it has.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from minikafka.spark.options import OptionError

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def source_schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    return to_arrow_schema(schema, timezone="UTC")


class SchemaError(ValueError):
    """A user-given schema or a DataFrame's columns that this data source cannot use."""


def check_read_schema(schema: StructType, include_headers: bool) -> None:
    expected = source_schema(include_headers)
    if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in expected.fields]:
        raise SchemaError(f"the minikafka source has a fixed schema and does not accept a user-specified one; "
                          f"its schema is {expected.simpleString()} (headers only with includeHeaders=true)")


@dataclass(frozen=True)
class SinkColumns:
    """Positions of the columns a writer uses in each input row; None for a column not given."""

    value: int
    key: int | None
    topic: int | None
    partition: int | None
    headers: int | None
    key_is_string: bool
    value_is_string: bool


def _is_headers_type(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = [(f.name.lower(), type(f.dataType)) for f in data_type.elementType.fields]
    return fields == [("key", StringType), ("value", BinaryType)]


def check_sink_schema(schema: StructType, topic_option: str | None) -> SinkColumns:
    """Which columns a write uses; a SchemaError naming the column when one cannot be used."""
    positions = {f.name.lower(): i for i, f in enumerate(schema.fields)}
    types = {f.name.lower(): f.dataType for f in schema.fields}

    def column(name: str, allowed: tuple[type[DataType], ...], required: bool = False) -> int | None:
        if name not in positions:
            if required:
                raise SchemaError(f"the minikafka sink needs a {name} column (string or binary); "
                                  f"the DataFrame has {schema.simpleString()}")
            return None
        if not isinstance(types[name], allowed):
            wanted = " or ".join(t.typeName() for t in allowed)
            raise SchemaError(f"column {name} must be {wanted}, not {types[name].simpleString()}")
        return positions[name]

    value = column("value", (StringType, BinaryType), required=True)
    key = column("key", (StringType, BinaryType))
    topic = column("topic", (StringType,))
    partition = column("partition", (IntegerType,))
    headers = None
    if "headers" in positions:
        if not _is_headers_type(types["headers"]):
            raise SchemaError(f"column headers must be {HEADERS_TYPE.simpleString()}, "
                              f"not {types['headers'].simpleString()}")
        headers = positions["headers"]
    if topic is None and topic_option is None:
        raise OptionError("the minikafka sink needs the option topic or a topic column")
    assert value is not None
    return SinkColumns(
        value=value, key=key, topic=topic, partition=partition, headers=headers,
        key_is_string=key is not None and isinstance(types["key"], StringType),
        value_is_string=isinstance(types["value"], StringType),
    )
