"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials, and both sides of the
exchange, as pure code (no I/O; time and randomness come in as arguments where tests need them).

A credential is what the broker keeps of a password: the salt, the iteration count and two keys
derived from the salted password (``stored_key`` checks a client's proof, ``server_key`` signs
the server's answer). The password itself, and the salted password, are never stored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
# The hash of each mechanism, and its number in the KIP-554 APIs (Kafka's ScramMechanism).
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MECHANISM_IDS = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISMS_BY_ID = {number: name for name, number in MECHANISM_IDS.items()}
# Kafka's bounds on the iteration count of a credential.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramError(ValueError):
    """A SCRAM message that is malformed, or a proof that does not verify."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def encode(self) -> str:
        """Kafka's text form (ScramCredentialUtils), as kept in ZooKeeper's /config/users."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        try:
            fields = dict(part.split("=", 1) for part in text.split(","))
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ScramError(f"not a SCRAM credential ({exc})") from None


def _hmac(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, HASHES[mechanism]).digest()


def _hash(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(HASHES[mechanism], data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The credential of a salted password (AlterUserScramCredentials sends the salted one)."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(salt, _hash(mechanism, client_key), _hmac(mechanism, salted, b"Server Key"), iterations)


def new_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                   salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt,
                                  iterations)


def iteration_error(iterations: int) -> str | None:
    if iterations < MIN_ITERATIONS:
        return f"Too few iterations: {iterations} (at least {MIN_ITERATIONS})"
    if iterations > MAX_ITERATIONS:
        return f"Too many iterations: {iterations} (at most {MAX_ITERATIONS})"
    return None


def _attributes(message: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError(f"malformed SCRAM attribute {part[:40]!r}")
        pairs.append((part[0], part[2:]))
    return pairs


def decode_saslname(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError("malformed user name (a '=' not written =2C or =3D)")
    return name.replace("=2C", ",").replace("=3D", "=")


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _text(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"{what} is not UTF-8") from None


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ScramError(f"{what} is not base64") from None


@dataclass(frozen=True)
class ClientFirst:
    gs2_header: str
    authzid: str
    username: str
    nonce: str
    bare: str  # client-first-message-bare, part of the signed AuthMessage
    extensions: dict[str, str]

    @classmethod
    def parse(cls, token: bytes) -> ClientFirst:
        message = _text(token, "client-first-message")
        match = re.fullmatch(r"([ny]|p=[^,]*),(a=[^,]*)?,(.*)", message, re.S)
        if match is None:
            raise ScramError("client-first-message has no GS2 header")
        if match.group(1).startswith("p="):
            raise ScramError("channel binding is not supported")
        bare = match.group(3)
        attributes = _attributes(bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise ScramError("client-first-message must start with n=<user>,r=<nonce>")
        nonce = attributes[1][1]
        if not nonce or not all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce):
            raise ScramError("malformed client nonce")
        authzid = decode_saslname(match.group(2)[2:]) if match.group(2) else ""
        extensions = dict(attributes[2:])
        return cls(f"{match.group(1)},{match.group(2) or ''},", authzid, decode_saslname(attributes[0][1]), nonce,
                   bare, extensions)


@dataclass(frozen=True)
class ClientFinal:
    channel_binding: str
    nonce: str
    proof: bytes
    without_proof: str

    @classmethod
    def parse(cls, token: bytes) -> ClientFinal:
        message = _text(token, "client-final-message")
        head, sep, proof = message.rpartition(",p=")
        if not sep:
            raise ScramError("client-final-message has no proof")
        attributes = _attributes(head)
        if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
            raise ScramError("client-final-message must start with c=<binding>,r=<nonce>")
        return cls(attributes[0][1], attributes[1][1], _b64decode(proof, "client proof"), head)


class ScramServer:
    """The server side of one SCRAM exchange: ``client_first`` -> server-first message,
    ``client_final`` -> server-final message (raises ScramError when the proof is wrong).

    ``credential`` is the user's, or None for a user that does not exist: the exchange then
    runs against a made-up credential and fails at the proof, like a wrong password, so that
    neither the answers nor their timing tell which users exist.
    """

    def __init__(self, mechanism: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._server_nonce = nonce or secrets.token_urlsafe(24)
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._known_user = False

    def client_first(self, token: bytes, credential: ScramCredential | None) -> tuple[ClientFirst, bytes]:
        first = ClientFirst.parse(token)
        self._known_user = credential is not None
        self._credential = credential or _decoy_credential(self.mechanism, first.username)
        self._first = first
        self._server_first = (f"r={first.nonce}{self._server_nonce},"
                              f"s={base64.b64encode(self._credential.salt).decode()},i={self._credential.iterations}")
        return first, self._server_first.encode()

    def client_final(self, token: bytes) -> bytes:
        if self._first is None or self._credential is None:
            raise ScramError("client-final-message before client-first-message")
        final = ClientFinal.parse(token)
        if _b64decode(final.channel_binding, "channel binding") != self._first.gs2_header.encode():
            raise ScramError("channel binding does not match the GS2 header")
        # The nonce must be ours; librdkafka 2.0 (kcat's, in Debian 12) sends the client nonce twice
        # before it, which Kafka accepts (it checks only the proof, whose signed message holds the
        # nonces as the client sent them and this exchange's server-first message): so do we.
        if not (final.nonce.startswith(self._first.nonce) and final.nonce.endswith(self._server_nonce)):
            raise ScramError("nonce does not match")
        auth_message = f"{self._first.bare},{self._server_first},{final.without_proof}".encode()
        signature = _hmac(self.mechanism, self._credential.stored_key, auth_message)
        if len(final.proof) != len(signature):
            raise ScramError("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(final.proof, signature, strict=True))
        valid = hmac.compare_digest(_hash(self.mechanism, client_key), self._credential.stored_key)
        if not (valid and self._known_user):
            raise ScramError("Authentication failed: Invalid user credentials")
        server_signature = _hmac(self.mechanism, self._credential.server_key, auth_message)
        return f"v={base64.b64encode(server_signature).decode()}".encode()


# A per-process secret: a made-up credential is the same for a name across attempts (so its
# salt does not change and give it away) but cannot be computed by a client.
_DECOY_SECRET = secrets.token_bytes(32)


def _decoy_credential(mechanism: str, username: str) -> ScramCredential:
    salt = _hmac(mechanism, _DECOY_SECRET, b"salt:" + username.encode())[:32]
    keys = _hmac(mechanism, _DECOY_SECRET, b"keys:" + username.encode())
    return ScramCredential(salt, _hash(mechanism, keys), keys, MIN_ITERATIONS)


class ScramClient:
    """The client side of one SCRAM exchange (the broker logging in to another broker)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare = f"n={encode_saslname(username)},r={self._nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        try:
            attributes = dict(_attributes(server_first.decode("utf-8")))
            nonce, salt, iterations = attributes["r"], _b64decode(attributes["s"], "salt"), int(attributes["i"])
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise ScramError(f"malformed server-first-message ({exc})") from None
        if not nonce.startswith(self._nonce):
            raise ScramError("the server's nonce does not extend ours")
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._bare},{server_first.decode()},{without_proof}".encode()
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        signature = _hmac(self.mechanism, _hash(self.mechanism, client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self.mechanism, _hmac(self.mechanism, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise ScramError(f"the server refused: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(
                _b64decode(text[2:], "server signature"), self._server_signature):
            raise ScramError("the server's signature does not verify: not the broker we meant to reach")
