"""Operator tools behind the `minikafka` subcommands other than `serve`."""
