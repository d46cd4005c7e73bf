"""What the group and the transaction coordinators share, as Kafka 4's coordinator-common: the
versioned record format of their internal topics (records.py).

Below group/ and txn/, which are independent siblings: neither imports the other.
"""
