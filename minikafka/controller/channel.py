"""The controller's connections to the brokers: LeaderAndIsr, UpdateMetadata, StopReplica.

``ControllerChannels`` owns one ``BrokerChannel`` per live broker. A channel sends its
requests in order, one at a time, and retries a request until the broker answers or leaves
(a broker that is restarting gets what it missed when it registers again, from the
controller's broker-change handling). A request may wait for requests on other channels to be
answered first (``after``), holding the ones queued behind it: the controller tells new leaders
before their followers and the metadata. Requests are built when they are sent, so they carry
the controller epoch and the broker epoch of that moment. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from minikafka.config.inter_broker_protocol import DEFAULT as DEFAULT_INTER_BROKER_PROTOCOL
from minikafka.config.inter_broker_protocol import InterBrokerProtocolVersion
from minikafka.net.client import BrokerClient, BrokerUnreachable
from minikafka.security.client import PLAINTEXT_CLIENT, ClientSecurity
from protocol import Message

log = logging.getLogger(__name__)

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
NAMES = {LEADER_AND_ISR: "LeaderAndIsr", STOP_REPLICA: "StopReplica", UPDATE_METADATA: "UpdateMetadata"}
RETRY_BACKOFF_S = 0.2
DRAIN_POLL_S = 0.01
REQUEST_TIMEOUT_S = 30.0
# How long a request waits for the answers it is sent after: a broker that cannot answer (stopped,
# or gone before the controller saw it leave) holds the others' requests no longer than this.
AFTER_WAIT_S = 5.0


def _future() -> asyncio.Future[None]:
    return asyncio.get_running_loop().create_future()


def nothing_to_wait_for() -> asyncio.Future[None]:
    """The future of a request that is not sent: done already."""
    done = _future()
    done.set_result(None)
    return done


@dataclass
class _Pending:
    api_key: int
    body: Mapping[str, Any]
    on_response: Callable[[Message], None] | None
    after: asyncio.Future[Any] | None = None
    # Done once the broker answered, or the channel closed without an answer.
    answered: asyncio.Future[None] = field(default_factory=_future)

    def end(self) -> None:
        if not self.answered.done():
            self.answered.set_result(None)


def request_versions(level: InterBrokerProtocolVersion) -> dict[int, int]:
    """The versions a Kafka controller at inter.broker.protocol.version ``level`` sends."""
    return {LEADER_AND_ISR: level.leader_and_isr_version, STOP_REPLICA: level.stop_replica_version,
            UPDATE_METADATA: level.update_metadata_version}


class BrokerChannel:
    def __init__(self, broker_id: int, broker_epoch: int, address: tuple[str, int], controller_id: int,
                 security: ClientSecurity = PLAINTEXT_CLIENT, versions: Mapping[int, int] | None = None) -> None:
        self.broker_id = broker_id
        self.versions = versions or request_versions(DEFAULT_INTER_BROKER_PROTOCOL)
        self.broker_epoch = broker_epoch
        self.client = BrokerClient(*address, client_id=f"controller-{controller_id}", security=security)
        self.queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self.current: _Pending | None = None
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-channel-{broker_id}")

    async def _run(self) -> None:
        while True:
            pending = self.current = await self.queue.get()
            try:
                if pending.after is not None:
                    await self._wait_for(pending)
                await self._send(pending)
            except asyncio.CancelledError:
                raise
            except Exception:  # a request that cannot even be built: a bug, never a reason to stop
                log.exception("could not send %s to broker %d", NAMES[pending.api_key], self.broker_id)
            finally:
                pending.end()
                self.current = None

    async def _wait_for(self, pending: _Pending) -> None:
        assert pending.after is not None
        done, _ = await asyncio.wait({pending.after}, timeout=AFTER_WAIT_S)
        if not done:
            log.warning("the new leaders had not answered their LeaderAndIsr after %.0f s; sending %s to broker %d "
                        "anyway", AFTER_WAIT_S, NAMES[pending.api_key], self.broker_id)

    @property
    def idle(self) -> bool:
        """Every request queued so far has been answered (or given up)."""
        return self.current is None and self.queue.empty()

    async def _send(self, pending: _Pending) -> None:
        body = {**pending.body, "broker_epoch": self.broker_epoch}
        attempts = 0
        while True:
            try:
                response = await self.client.request(pending.api_key, self.versions[pending.api_key], body,
                                                     REQUEST_TIMEOUT_S)
                break
            except BrokerUnreachable as exc:
                attempts += 1
                if attempts == 1 or attempts % 50 == 0:
                    log.warning("%s to broker %d failed (%s); retrying", NAMES[pending.api_key], self.broker_id, exc)
                await asyncio.sleep(RETRY_BACKOFF_S)
        if response.error_code:
            log.warning("broker %d answered %s with error %d", self.broker_id, NAMES[pending.api_key],
                        response.error_code)
        if pending.on_response is not None:
            pending.on_response(response)

    def send(self, api_key: int, body: Mapping[str, Any], on_response: Callable[[Message], None] | None = None,
             after: asyncio.Future[Any] | None = None) -> asyncio.Future[None]:
        """Queue a request, sent once ``after`` (if given) is done or AFTER_WAIT_S passed; done
        when the broker answered it or the channel closed."""
        pending = _Pending(api_key, body, on_response, after)
        self.queue.put_nowait(pending)
        return pending.answered

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        self.client.close()
        while not self.queue.empty():  # nothing waits for a broker that left
            self.queue.get_nowait().end()


class ControllerChannels:
    def __init__(self, controller_id: int, security: ClientSecurity = PLAINTEXT_CLIENT,
                 level: InterBrokerProtocolVersion = DEFAULT_INTER_BROKER_PROTOCOL) -> None:
        self.controller_id = controller_id
        self.security = security
        # Every broker of the cluster reads the requests of the cluster's level (a rolling
        # upgrade raises it only once all of them run the new release).
        self.versions = request_versions(level)
        self.channels: dict[int, BrokerChannel] = {}

    def add(self, broker_id: int, broker_epoch: int, address: tuple[str, int],
            security: ClientSecurity | None = None) -> None:
        """A channel to ``broker_id`` at ``address``, connected with ``security`` (default: the
        channels' own), replacing one to an earlier registration of it."""
        old = self.channels.get(broker_id)
        if old is not None and old.broker_epoch == broker_epoch:
            return
        if old is not None:
            asyncio.get_running_loop().create_task(old.close())
        self.channels[broker_id] = BrokerChannel(broker_id, broker_epoch, address, self.controller_id,
                                                 security or self.security, self.versions)

    async def remove(self, broker_id: int) -> None:
        channel = self.channels.pop(broker_id, None)
        if channel is not None:
            await channel.close()

    def send(self, broker_id: int, api_key: int, body: Mapping[str, Any],
             on_response: Callable[[Message], None] | None = None,
             after: asyncio.Future[Any] | None = None) -> asyncio.Future[None]:
        """Queue a request to ``broker_id`` (see BrokerChannel.send); with no channel to it, the
        future returned is done."""
        channel = self.channels.get(broker_id)
        if channel is not None:
            return channel.send(api_key, body, on_response, after)
        return nothing_to_wait_for()

    async def drain(self, timeout: float, skip: Collection[int] = ()) -> list[int]:
        """Wait (at most ``timeout`` seconds) until every channel but those to ``skip`` has
        delivered what was queued; the brokers whose requests are still pending then."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (pending := sorted(b for b, c in self.channels.items() if b not in skip and not c.idle)) \
                and loop.time() < deadline:
            await asyncio.sleep(DRAIN_POLL_S)
        return pending

    async def close(self) -> None:
        for broker_id in list(self.channels):
            await self.remove(broker_id)
