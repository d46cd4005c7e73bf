"""What the group and the transaction coordinators share, as Kafka 4's coordinator-common: the
runtime that loads and unloads their partitions and writes a change before it is applied
(runtime.py), the storage of their internal topics (topic.py) and the versioned record format
of those topics' keys and values (records.py).

Below group/ and txn/, which are independent siblings: neither imports the other.
"""
