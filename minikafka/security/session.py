"""One client connection's identity: its principal, and on a SASL listener where its
authentication stands (Kafka's SaslServerAuthenticator, as a table of allowed transitions).

Before a SASL client has authenticated, only ApiVersions, SaslHandshake and then SaslAuthenticate
reach their handlers; anything else closes the connection, as do a failed authentication (after
``connection.failed.authentication.delay.ms``, once its answer is sent) and, once a session has
lasted ``connections.max.reauth.ms``, any request but a re-authentication (KIP-368). A connection
is owned by its reader task; so is its session.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import Counter

from minikafka.security import acl
from minikafka.security.acl import AclOperation, ResourceType
from minikafka.security.principal import ANONYMOUS, KafkaPrincipal, user
from minikafka.security.sasl import AuthenticationFailed, CredentialLookup, MechanismServer, mechanism_server
from protocol import ProtocolError, Request, frame
from protocol.errors import ErrorCode
from protocol.typed.sasl_authenticate import SaslAuthenticateRequestView, SaslAuthenticateResponse
from protocol.typed.sasl_handshake import SaslHandshakeRequestView, SaslHandshakeResponse

log = logging.getLogger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36

AUTHENTICATIONS = Counter("minikafka_authentications", "SASL authentications that succeeded, per listener and "
                          "mechanism", ["listener", "mechanism"])
FAILED_AUTHENTICATIONS = Counter("minikafka_failed_authentications", "SASL authentications refused (a wrong "
                                 "password, an unknown user, a malformed exchange), per listener and mechanism",
                                 ["listener", "mechanism"])
AUTHORIZATION_DENIALS = Counter("minikafka_authorization_denials", "Actions the authorizer refused, per operation "
                                "and resource type", ["operation", "resource_type"])


class SaslState(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "authenticating"
    AUTHENTICATED = "authenticated"
    REAUTHENTICATE = "re-authenticating"
    FAILED = "failed"


TRANSITIONS: dict[SaslState, frozenset[SaslState]] = {
    SaslState.HANDSHAKE: frozenset({SaslState.AUTHENTICATE, SaslState.FAILED}),
    SaslState.AUTHENTICATE: frozenset({SaslState.AUTHENTICATED, SaslState.FAILED}),
    SaslState.AUTHENTICATED: frozenset({SaslState.REAUTHENTICATE, SaslState.FAILED}),
    SaslState.REAUTHENTICATE: frozenset({SaslState.AUTHENTICATED, SaslState.FAILED}),
    SaslState.FAILED: frozenset(),
}
# The requests each state lets through (None: every request).
ADMITTED: dict[SaslState, frozenset[int] | None] = {
    SaslState.HANDSHAKE: frozenset({API_VERSIONS, SASL_HANDSHAKE}),
    SaslState.AUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
    SaslState.AUTHENTICATED: None,
    SaslState.REAUTHENTICATE: frozenset({SASL_AUTHENTICATE}),
    SaslState.FAILED: frozenset(),
}


class RefusedBySession(ProtocolError):
    """A request the connection's authentication state does not allow: the connection closes."""


class ConnectionControl(Protocol):
    """What a session may do to its connection."""

    def limit_frames(self, max_frame_size: int) -> None: ...

    def close_after_response(self) -> None: ...

    raw_frames: Callable[[bytes], Coroutine[Any, Any, Sequence[Any]]] | None


@dataclass(frozen=True)
class ListenerSecurity:
    """What one listener asks of its connections."""

    name: str
    protocol: str
    mechanisms: tuple[str, ...] = ()  # SASL listeners only
    plain_users: dict[str, str] = field(default_factory=dict)
    max_receive_size: int = 524288  # the largest frame before authentication
    max_request_size: int = 104857600  # and after it (socket.request.max.bytes)
    max_reauth_ms: int = 0
    failure_delay_ms: int = 100

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


class Authorizer:
    """The ACLs this broker enforces (its cache of the security store) and the decisions made
    on them. Changed only through ``replace``; event-loop thread only."""

    def __init__(self, enabled: bool, settings: acl.AuthorizerSettings) -> None:
        self.enabled = enabled
        self.settings = settings
        self.acls: dict[acl.ResourcePattern, frozenset[acl.AccessControlEntry]] = {}

    def replace(self, pattern: acl.ResourcePattern, entries: frozenset[acl.AccessControlEntry]) -> None:
        if entries:
            self.acls[pattern] = entries
        else:
            self.acls.pop(pattern, None)

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if not self.enabled:
            return True
        allowed = acl.authorize(self.acls, self.settings, principal, host, operation, resource_type, name)
        if not allowed:
            AUTHORIZATION_DENIALS.labels(operation.name, resource_type.name).inc()
            log.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
                     principal, acl.pascal(operation.name), host, acl.pascal(resource_type.name), name)
        return allowed

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        if not self.enabled:
            return True
        return acl.authorize_any(self.acls, self.settings, principal, host, operation, resource_type)


class Session:
    """The identity and authentication state of one connection; see the module docstring."""

    def __init__(self, listener: ListenerSecurity, client_host: str, authorizer: Authorizer,
                 credentials: CredentialLookup, principal: KafkaPrincipal = ANONYMOUS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.listener = listener
        self.client_host = client_host
        self.authorizer = authorizer
        self._credentials = credentials
        self._clock = clock
        self.principal = principal
        self.state = SaslState.HANDSHAKE if listener.sasl else SaslState.AUTHENTICATED
        self.mechanism: str | None = None
        self._server: MechanismServer | None = None
        self._expires_at: float | None = None
        self._connection: ConnectionControl | None = None

    def attach(self, connection: ConnectionControl) -> None:
        self._connection = connection
        if self.listener.sasl:
            connection.limit_frames(self.listener.max_receive_size)

    def _move(self, state: SaslState) -> None:
        if state not in TRANSITIONS[self.state]:
            raise RefusedBySession(f"SASL state {self.state.value} cannot become {state.value}")
        self.state = state

    # ---- admission ------------------------------------------------------------------------------
    def admit(self, request: Request) -> None:
        """Raise RefusedBySession (closing the connection) for a request its state refuses."""
        allowed = ADMITTED[self.state]
        if allowed is not None and request.api_key not in allowed:
            raise RefusedBySession(f"unexpected request (api key {request.api_key}) while {self.state.value} "
                                   f"on SASL listener {self.listener.name}")
        if self.state == SaslState.AUTHENTICATED and self.expired() and request.api_key != SASL_HANDSHAKE:
            raise RefusedBySession(f"the SASL session of {self.principal} expired "
                                   f"(connections.max.reauth.ms={self.listener.max_reauth_ms}) and the client did "
                                   "not re-authenticate")

    def expired(self) -> bool:
        return self._expires_at is not None and self._clock() >= self._expires_at

    # ---- SaslHandshake ------------------------------------------------------------------------
    def handshake(self, request: Request[SaslHandshakeRequestView]) -> SaslHandshakeResponse:
        mechanisms = list(self.listener.mechanisms)
        if not self.listener.sasl or self.state not in (SaslState.HANDSHAKE, SaslState.AUTHENTICATED):
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
        wanted = request.body.mechanism
        reauthenticating = self.state == SaslState.AUTHENTICATED
        if wanted not in self.listener.mechanisms or (reauthenticating and wanted != self.mechanism):
            log.info("closing connection from %s on listener %s: SASL mechanism %r %s", self.client_host,
                     self.listener.name, wanted, "is not the one it authenticated with" if reauthenticating
                     else f"is not enabled ({', '.join(mechanisms)})")
            self._fail_and_close()
            return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": mechanisms}
        if reauthenticating and request.api_version == 0:
            self._fail_and_close()
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
        self._move(SaslState.REAUTHENTICATE if reauthenticating else SaslState.AUTHENTICATE)
        self.mechanism = wanted
        self._server = mechanism_server(wanted, self.listener.plain_users, self._credentials)
        if request.api_version == 0 and self._connection is not None:
            # v0: the tokens that follow travel as bare size-prefixed frames, not SaslAuthenticate.
            self._connection.raw_frames = self._raw_token
        return {"error_code": ErrorCode.NONE, "mechanisms": mechanisms}

    # ---- SaslAuthenticate ---------------------------------------------------------------------
    async def authenticate(self, request: Request[SaslAuthenticateRequestView]) -> SaslAuthenticateResponse:
        if self.state not in (SaslState.AUTHENTICATE, SaslState.REAUTHENTICATE) or self._server is None:
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message":
                    f"SaslAuthenticate while {self.state.value}" if self.listener.sasl
                    else f"listener {self.listener.name} is not a SASL listener", "auth_bytes": b""}
        try:
            answer = await self._evaluate(bytes(request.body.auth_bytes))
        except AuthenticationFailed as exc:
            return {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(exc), "auth_bytes": b""}
        lifetime = self.listener.max_reauth_ms if self.state == SaslState.AUTHENTICATED else 0
        return {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": answer,
                "session_lifetime_ms": lifetime}

    async def _evaluate(self, token: bytes) -> bytes:
        assert self._server is not None and self.mechanism is not None
        try:
            answer = self._server.evaluate(token)
            if self._server.complete:
                self._authenticated(user(self._server.username))
        except AuthenticationFailed as exc:
            FAILED_AUTHENTICATIONS.labels(self.listener.name, self.mechanism).inc()
            log.info("failed authentication with %s on listener %s (%s): %s", self.client_host, self.listener.name,
                     self.mechanism, exc)
            self._fail_and_close()
            await asyncio.sleep(self.listener.failure_delay_ms / 1000)
            raise
        return answer

    def _authenticated(self, principal: KafkaPrincipal) -> None:
        if self.state == SaslState.REAUTHENTICATE and principal != self.principal:
            raise AuthenticationFailed(f"re-authentication as {principal} on a connection of {self.principal}")
        first = self.state == SaslState.AUTHENTICATE
        self._move(SaslState.AUTHENTICATED)
        self.principal = principal
        max_reauth = self.listener.max_reauth_ms
        self._expires_at = self._clock() + max_reauth / 1000 if max_reauth > 0 else None
        AUTHENTICATIONS.labels(self.listener.name, self.mechanism or "").inc()
        if self._connection is not None:
            self._connection.raw_frames = None
            if first:
                self._connection.limit_frames(self.listener.max_request_size)
        log.debug("%s %s as %s on listener %s", self.client_host, "authenticated" if first else "re-authenticated",
                  principal, self.listener.name)

    async def _raw_token(self, payload: bytes) -> list[bytes]:
        """A SASL token of the v0 handshake: answered as a bare frame, a failure closes."""
        try:
            return [frame(await self._evaluate(payload))]
        except AuthenticationFailed:
            return []

    def _fail_and_close(self) -> None:
        if self.state != SaslState.FAILED:
            self._move(SaslState.FAILED)
        if self._connection is not None:
            self._connection.raw_frames = None
            self._connection.close_after_response()

    # ---- authorization ------------------------------------------------------------------------
    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.client_host, operation, resource_type, name)

    def allowed_on_cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, acl.CLUSTER_NAME)

    def allowed_on_some(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """On some resource of the type (Kafka's authorizeByResourceType, KIP-679)."""
        return self.authorizer.authorize_any(self.principal, self.client_host, operation, resource_type)
