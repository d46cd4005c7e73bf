"""What the group and the transaction coordinators share, as Kafka 4's coordinator-common: the
storage of their internal topics (topic.py) and the versioned record format of those topics'
keys and values (records.py).

Below group/ and txn/, which are independent siblings: neither imports the other.
"""
