"""Example pipelines that use minikafka; each runs against `make run` (see README.md)."""
