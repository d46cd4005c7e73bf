"""Kafka's ``sasl.jaas.config`` values: one JAAS login module and its options.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

PlainLoginModule's ``user_<name>`` options are the users a PLAIN listener accepts; ``username``
and ``password`` of either module are the broker's own credentials when it connects to other
brokers. Pure parsing: a value that cannot be read raises ValueError saying where.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
LOGIN_MODULES = {"PLAIN": PLAIN_LOGIN_MODULE, "SCRAM-SHA-256": SCRAM_LOGIN_MODULE, "SCRAM-SHA-512": SCRAM_LOGIN_MODULE}
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))', re.S)


@dataclass(frozen=True)
class JaasModule:
    login_module: str
    flag: str
    options: dict[str, str]

    @property
    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` options."""
        return {key[len("user_"):]: value for key, value in self.options.items() if key.startswith("user_")}

    @property
    def credentials(self) -> tuple[str, str] | None:
        """(username, password) this broker logs in to others with, if given."""
        if "username" in self.options and "password" in self.options:
            return self.options["username"], self.options["password"]
        return None


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"cannot read {text[position:position + 20].strip()!r}")
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.S)
        tokens.append((kind, value))
        position = match.end()
    return tokens


def parse_jaas_config(text: str) -> JaasModule:
    """The one login module of a ``sasl.jaas.config`` value (Kafka requires exactly one)."""
    tokens = _tokens(text)
    modules: list[JaasModule] = []
    index = 0
    while index < len(tokens):
        if len(tokens) - index < 2 or tokens[index][0] != "word" or tokens[index + 1][1] not in _FLAGS:
            raise ValueError("expected '<LoginModule class> required|requisite|sufficient|optional "
                             "key=\"value\" ... ;'")
        module, flag = tokens[index][1], tokens[index + 1][1]
        index += 2
        options: dict[str, str] = {}
        while index < len(tokens) and tokens[index] != ("punct", ";"):
            if index + 2 >= len(tokens) or tokens[index][0] != "word" or tokens[index + 1] != ("punct", "=") \
                    or tokens[index + 2][0] == "punct":
                raise ValueError(f"option {tokens[index][1]!r} of {module} is not key=\"value\"")
            options[tokens[index][1]] = tokens[index + 2][1]
            index += 3
        if index >= len(tokens):
            raise ValueError(f"the options of {module} must end with ';'")
        index += 1
        modules.append(JaasModule(module, flag, options))
    if len(modules) != 1:
        raise ValueError(f"must hold exactly one login module, not {len(modules)}")
    return modules[0]
