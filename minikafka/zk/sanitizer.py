"""Kafka's Sanitizer: user names and client ids as znode names (/config/users/<name>,
/config/clients/<id>), kept apart from the stores so that the command-line tools need not load
ZooKeeper's client to name an entity."""

from __future__ import annotations

import urllib.parse


def sanitize(name: str) -> str:
    """A name as Kafka writes it in a znode's name (Java's URLEncoder, ``*`` and space as %2A
    and %20)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)
