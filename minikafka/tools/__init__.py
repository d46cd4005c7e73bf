"""Operator tools behind the `minikafka` subcommands other than `serve`.

Clients of the broker, yet inside its package: they are subcommands of the one `minikafka`
command, installed and versioned with the broker they administer, and they read the same files
with the broker's own code (server.properties and --command-config through config/, JAAS and the
SASL login through security/, __consumer_offsets' records through group/, the disk balancer's
plan through replica/). The layer contract keeps them above everything they use and lets nothing
of the broker import them.
"""
