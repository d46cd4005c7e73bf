"""Cluster metadata as every layer above storage reads it: the MetadataStore the controller keeps
its state behind (and security its credentials and ACLs), and the names of the internal topics.

It sits below controller/, group/, txn/ and security/, so none of them reaches up into another
to learn a topic's name or where metadata lives. It imports storage/ only (the local store writes
through the log dirs' guard).
"""
