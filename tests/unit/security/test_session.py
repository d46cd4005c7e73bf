"""A connection's SASL session: what each state admits, the exchange, failures, re-authentication."""

from typing import Any

import pytest

from minikafka.security import scram
from minikafka.security.acl import AuthorizerSettings
from minikafka.security.principal import ANONYMOUS, user
from minikafka.security.sasl import SaslLogin
from minikafka.security.session import (
    FAILED_AUTHENTICATIONS,
    Authorizer,
    ListenerSecurity,
    RefusedBySession,
    SaslState,
    Session,
)
from protocol import encode_request, frame, parse_request
from protocol.errors import ErrorCode

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
SCRAM_ALICE = scram.new_credential(scram.SCRAM_SHA_512, "alice-scram", 4096)


class FakeConnection:
    """What a session may do to its connection, recorded."""

    def __init__(self) -> None:
        self.frame_limits: list[int] = []
        self.closing = False
        self.raw_frames: Any = None

    def limit_frames(self, max_frame_size: int) -> None:
        self.frame_limits.append(max_frame_size)

    def close_after_response(self) -> None:
        self.closing = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def request(api_key: int, version: int, body: dict[str, Any]) -> Any:
    return parse_request(encode_request(api_key, version, 7, "test", body)[4:])


def handshake(mechanism: str, version: int = 1) -> Any:
    return request(SASL_HANDSHAKE, version, {"mechanism": mechanism})


def authenticate(token: bytes) -> Any:
    return request(SASL_AUTHENTICATE, 2, {"auth_bytes": token})


def metadata() -> Any:
    return request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})


def sasl_session(max_reauth_ms: int = 0, clock: Clock | None = None) -> tuple[Session, FakeConnection]:
    listener = ListenerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT", ("PLAIN", scram.SCRAM_SHA_512),
                                {"alice": "alice-secret", "bob": "bob-secret"}, max_receive_size=1000, max_request_size=99999,
                                max_reauth_ms=max_reauth_ms, failure_delay_ms=0)
    session = Session(listener, "127.0.0.1", Authorizer(False, AuthorizerSettings(frozenset(), False)),
                      lambda mechanism, name: SCRAM_ALICE if (mechanism, name) == (scram.SCRAM_SHA_512, "alice")
                      else None, clock=clock or Clock())
    connection = FakeConnection()
    session.attach(connection)
    return session, connection


def test_a_plaintext_listener_admits_everything_and_refuses_sasl():
    listener = ListenerSecurity("PLAINTEXT", "PLAINTEXT")
    session = Session(listener, "127.0.0.1", Authorizer(False, AuthorizerSettings(frozenset(), False)),
                      lambda m, u: None)
    session.admit(metadata())
    assert session.principal == ANONYMOUS
    assert session.handshake(handshake("PLAIN"))["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


async def test_before_authentication_only_versions_and_the_handshake_pass():
    session, connection = sasl_session()
    assert connection.frame_limits == [1000]
    session.admit(request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}))
    with pytest.raises(RefusedBySession):
        session.admit(metadata())
    with pytest.raises(RefusedBySession):
        session.admit(authenticate(b"\0alice\0alice-secret"))
    assert session.handshake(handshake("PLAIN")) == {"error_code": ErrorCode.NONE,
                                                     "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}
    with pytest.raises(RefusedBySession):
        session.admit(metadata())
    session.admit(authenticate(b""))
    answer = await session.authenticate(authenticate(b"\0alice\0alice-secret"))
    assert answer["error_code"] == ErrorCode.NONE and answer["session_lifetime_ms"] == 0
    assert session.state == SaslState.AUTHENTICATED and session.principal == user("alice")
    assert connection.frame_limits == [1000, 99999]
    session.admit(metadata())


async def test_a_wrong_password_fails_closes_and_is_counted():
    session, connection = sasl_session()
    before = FAILED_AUTHENTICATIONS.labels("SASL_PLAINTEXT", "PLAIN")._value.get()
    session.handshake(handshake("PLAIN"))
    answer = await session.authenticate(authenticate(b"\0alice\0wrong"))
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Invalid username or password" in answer["error_message"]
    assert connection.closing and session.state == SaslState.FAILED
    assert FAILED_AUTHENTICATIONS.labels("SASL_PLAINTEXT", "PLAIN")._value.get() == before + 1
    with pytest.raises(RefusedBySession):
        session.admit(handshake("PLAIN"))


def test_an_unknown_mechanism_closes():
    session, connection = sasl_session()
    assert session.handshake(handshake("GSSAPI"))["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert connection.closing and session.state == SaslState.FAILED


async def test_scram_over_saslauthenticate():
    session, _ = sasl_session()
    session.handshake(handshake(scram.SCRAM_SHA_512))
    tokens = SaslLogin(scram.SCRAM_SHA_512, "alice", "alice-scram").tokens()
    first = await session.authenticate(authenticate(tokens.first()))
    final = tokens.next(first["auth_bytes"])
    assert final is not None and session.state == SaslState.AUTHENTICATE
    last = await session.authenticate(authenticate(final))
    assert last["error_code"] == ErrorCode.NONE and tokens.next(last["auth_bytes"]) is None
    assert session.principal == user("alice")


async def test_v0_handshake_takes_bare_tokens_until_authenticated():
    session, connection = sasl_session()
    session.handshake(handshake("PLAIN", version=0))
    assert connection.raw_frames is not None
    assert await connection.raw_frames(b"\0alice\0alice-secret") == [frame(b"")]
    assert connection.raw_frames is None and session.principal == user("alice")


async def test_v0_bare_token_failure_closes_without_an_answer():
    session, connection = sasl_session()
    session.handshake(handshake("PLAIN", version=0))
    assert await connection.raw_frames(b"\0alice\0nope") == []
    assert connection.closing


async def test_an_expired_session_admits_only_re_authentication():
    clock = Clock()
    session, connection = sasl_session(max_reauth_ms=5000, clock=clock)
    session.handshake(handshake("PLAIN"))
    assert (await session.authenticate(authenticate(b"\0alice\0alice-secret")))["session_lifetime_ms"] == 5000
    clock.now += 4.9
    session.admit(metadata())
    clock.now += 0.2
    with pytest.raises(RefusedBySession, match="expired"):
        session.admit(metadata())
    session.admit(handshake("PLAIN"))
    assert session.handshake(handshake("PLAIN"))["error_code"] == ErrorCode.NONE
    assert session.state == SaslState.REAUTHENTICATE
    await session.authenticate(authenticate(b"\0alice\0alice-secret"))
    session.admit(metadata())
    assert not connection.closing


async def test_re_authenticating_as_someone_else_or_by_another_mechanism_fails():
    for second in ("PLAIN", scram.SCRAM_SHA_512):
        session, connection = sasl_session()
        session.handshake(handshake("PLAIN"))
        await session.authenticate(authenticate(b"\0alice\0alice-secret"))
        answer = session.handshake(handshake(second))
        if second == "PLAIN":
            answer = await session.authenticate(authenticate(b"\0bob\0bob-secret"))
            assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        else:
            assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert connection.closing
