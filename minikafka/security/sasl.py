"""The SASL mechanisms, server side (a client authenticating to this broker) and client side
(this broker authenticating to another): PLAIN and SCRAM-SHA-256/512. Pure code: tokens in,
tokens out; the session (session.py) carries them over SaslAuthenticate.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from minikafka.security import scram
from minikafka.security.scram import ScramCredential, ScramError

PLAIN = "PLAIN"
MECHANISMS = (PLAIN, scram.SCRAM_SHA_256, scram.SCRAM_SHA_512)

# user name -> the credential of a SCRAM mechanism, None when the user has none.
CredentialLookup = Callable[[str, str], ScramCredential | None]


class AuthenticationFailed(Exception):
    """The client's token does not authenticate it; the message is what the client is told."""


class MechanismServer(Protocol):
    mechanism: str
    complete: bool
    # Who the client authenticated as, once complete.
    username: str

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to the client's next token; AuthenticationFailed when it fails."""


class PlainServer:
    """PLAIN (RFC 4616): one token, ``authzid NUL username NUL password``, checked against the
    listener's JAAS users. A missing user is checked against a made-up password, so a wrong user
    costs the same time as a wrong password."""

    mechanism = PLAIN

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username = ""

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("PLAIN takes a single token")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, username_bytes, password = parts
        try:
            username = username_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Authentication failed: Invalid username or password") from None
        if not username or not password:
            raise AuthenticationFailed("Authentication failed: username and password must not be empty")
        expected = self._users.get(username)
        # Digests of equal length: the comparison's time tells nothing of the password's length.
        matches = hmac.compare_digest(hashlib.sha256(password).digest(), hashlib.sha256(
            (expected if expected is not None else _NO_PASSWORD).encode()).digest())
        if not matches or expected is None:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username_bytes:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.username = username
        self.complete = True
        return b""


_NO_PASSWORD = "\0no such user\0"


class ScramMechanismServer:
    """SCRAM-SHA-256/512: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, credentials: CredentialLookup) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self._exchange = scram.ScramServer(mechanism)
        self._step = 0
        self.complete = False
        self.username = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._step == 0:
                self._step = 1
                return self._first(token)
            if self._step == 1:
                self._step = 2
                answer = self._exchange.client_final(token)
                self.complete = True
                return answer
        except ScramError as exc:
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism} ({exc})") from None
        raise AuthenticationFailed(f"{self.mechanism} takes two client tokens")

    def _first(self, token: bytes) -> bytes:
        first = scram.ClientFirst.parse(token)
        if first.extensions:
            # tokenauth=true is a delegation token, which this broker does not issue.
            raise ScramError(f"unsupported SCRAM extensions {sorted(first.extensions)}")
        if first.authzid and first.authzid != first.username:
            raise ScramError("the authorization id is not the user name")
        self.username = first.username
        _, answer = self._exchange.client_first(token, self._credentials(self.mechanism, first.username))
        return answer


def mechanism_server(mechanism: str, plain_users: dict[str, str], credentials: CredentialLookup) -> MechanismServer:
    if mechanism == PLAIN:
        return PlainServer(plain_users)
    return ScramMechanismServer(mechanism, credentials)


@dataclass(frozen=True)
class SaslLogin:
    """How this broker authenticates to another: a mechanism and its credentials."""

    mechanism: str
    username: str
    password: str

    def tokens(self) -> ClientTokens:
        return ClientTokens(self)


class ClientTokens:
    """The client side of one exchange: ``first()``, then ``next(server_token)`` until it returns
    None (done); ScramError when the server's answer is not the one a broker with the password
    would give."""

    def __init__(self, login: SaslLogin) -> None:
        self._login = login
        self._scram = None if login.mechanism == PLAIN else scram.ScramClient(
            login.mechanism, login.username, login.password)
        self._step = 0

    def first(self) -> bytes:
        if self._scram is None:
            return b"\0" + self._login.username.encode() + b"\0" + self._login.password.encode()
        return self._scram.first_message()

    def next(self, server_token: bytes) -> bytes | None:
        self._step += 1
        if self._scram is None:
            return None
        if self._step == 1:
            return self._scram.final_message(server_token)
        self._scram.verify_server_final(server_token)
        return None
