"""The broker's settings: server.properties with Apache Kafka's key names (broker.py), and the
facts about Kafka's own broker keys it builds on (kafka_broker_keys.py).

A layer of its own, at the bottom beside storage/: it imports nothing else of minikafka, and every
layer that reads a setting may import it (storage is given its settings as LogConfig values).
"""
