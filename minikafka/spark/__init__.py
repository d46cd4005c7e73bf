"""PySpark data source "minikafka": read and write Kafka topics with Spark's Kafka source options.

Needs the `spark` extra (`pip install minikafka[spark]`). Register it in a session with
`minikafka.spark.register(spark)` (or use `local_session()`), then use
`spark.read.format("minikafka")`, `spark.readStream.format("minikafka")`,
`df.write.format("minikafka")` and `df.writeStream.format("minikafka")` with the options and
columns of Spark's Kafka source and sink.

A client of the broker's wire protocol (through confluent-kafka), yet inside its package: the
`spark` extra installs it with the broker it was tested against, as the README's pipeline uses
it. It imports nothing of the broker (the layer contract checks that), so it could become a
distribution of its own without a change.
"""

import logging

from minikafka.spark.options import OptionError
from minikafka.spark.session import local_session
from minikafka.spark.source import FORMAT, MiniKafkaDataSource, register

# A library's loggers stay quiet unless the application configures logging (Spark's Python
# workers do not), so librdkafka's connection chatter does not flood executor stderr.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["FORMAT", "MiniKafkaDataSource", "OptionError", "local_session", "register"]
