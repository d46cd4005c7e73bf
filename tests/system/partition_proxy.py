"""Links between a test's processes that the test can cut, cut one way, slow down and heal: a
TCP proxy on 127.0.0.1 in front of every address a broker dials (ZooKeeper, and each broker's
inter-broker listener).

Why a proxy and not network namespaces: ``ip netns`` works on this machine (tests run as root),
but netem is not in its kernel (``tc qdisc ... netem`` answers "Specified qdisc kind is unknown"),
so namespaces could cut links but not slow them; the tests' network stays on 127.0.0.1, as every
other test's does; and a proxy needs no global state, so tests on parallel workers cannot cut
each other's links. The price: the brokers must dial each other through it, which they do as
they would through any network, by configuration alone: each broker's ``zookeeper.connect``
names its own proxy port for ZooKeeper, and its ``advertised.listeners`` names a proxy port for
its inter-broker listener. Clients of the test reach the brokers directly (they are never cut).

What a cut does is what a network partition does to TCP, not what a dead process does: nothing
is reset (no RST, no FIN). Bytes sent into a cut direction are held, the sender's writes block
once the buffers fill, and a connection attempted across a cut never completes its handshake.
On heal the held bytes go on in order, as TCP's retransmissions would deliver them; an end
that gave up meanwhile closes its own connection, as it would. A slow direction delivers each
chunk ``delay +- jitter`` after it was read, never out of order.

A connection's source is known for ZooKeeper by the port it came to (one per broker); to a
broker's inter-broker port, by the process that owns the connecting socket (/proc/net/tcp and
/proc/<pid>/fd), among the brokers' pids the test gives. Every link is named by its two ends:
"zk" or a broker id as a string.

``Proxy`` runs an event loop in a thread; its methods are for the test's thread. ``close()``
stops it, closing every connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

HOST = "127.0.0.1"
CHUNK = 65536
QUEUED_CHUNKS = 64  # per direction of a connection, before the proxy stops reading (backpressure)


@dataclass
class _Links:
    """What is cut or slowed, by direction (from, to). Touched on the proxy's loop only."""

    cut: set[tuple[str, str]] = field(default_factory=set)
    slow: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def open(self, source: str, target: str) -> bool:
        return (source, target) not in self.cut

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class Proxy:
    def __init__(self, pids: Callable[[], dict[int, str]], seed: int = 0) -> None:
        """``pids()`` names the brokers' current processes (pid -> link end name)."""
        self._pids = pids
        self._random = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._links: _Links | None = None
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name="partition-proxy", daemon=True)
        self._thread.start()
        self._links = self._call(self._new_links())

    @staticmethod
    async def _new_links() -> _Links:
        return _Links()

    def _call(self, coroutine: object) -> object:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    # ---- routes -----------------------------------------------------------------------------
    def route(self, target: str, address: tuple[str, int], source: str | None = None) -> int:
        """A proxy port in front of ``address`` (the end ``target``); connections to it come from
        ``source``, or (None) from whichever broker process owns the connecting socket."""
        async def listen() -> int:
            server = await asyncio.start_server(
                lambda reader, writer: self._accepted(reader, writer, target, address, source), HOST, 0)
            self._servers.append(server)
            return int(server.sockets[0].getsockname()[1])
        return int(self._call(listen()))

    # ---- faults -----------------------------------------------------------------------------
    def cut(self, source: str, target: str, both_ways: bool = True) -> None:
        """Bytes from ``source`` to ``target`` (and back, unless one way) no longer arrive."""
        def apply(links: _Links) -> None:
            links.cut.add((source, target))
            if both_ways:
                links.cut.add((target, source))
        self._change(apply)

    def slow(self, source: str, target: str, delay_s: float, jitter_s: float, both_ways: bool = True) -> None:
        def apply(links: _Links) -> None:
            links.slow[(source, target)] = (delay_s, jitter_s)
            if both_ways:
                links.slow[(target, source)] = (delay_s, jitter_s)
        self._change(apply)

    def heal(self) -> None:
        def apply(links: _Links) -> None:
            links.cut.clear()
            links.slow.clear()
        self._change(apply)

    def _change(self, apply: Callable[[_Links], None]) -> None:
        async def change() -> None:
            assert self._links is not None
            apply(self._links)
            self._links.notify()
        self._call(change())

    def close(self) -> None:
        async def stop() -> None:
            for server in self._servers:
                server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
        with contextlib.suppress(Exception):
            self._call(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # ---- connections ------------------------------------------------------------------------
    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: str,
                  address: tuple[str, int], source: str | None) -> None:
        task = self._loop.create_task(self._serve(reader, writer, target, address, source))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: str,
                     address: tuple[str, int], source: str | None) -> None:
        links = self._links
        assert links is not None
        upstream: asyncio.StreamWriter | None = None
        try:
            if source is None:
                peer_port = writer.get_extra_info("peername")[1]
                own_port = writer.get_extra_info("sockname")[1]
                source = await self._loop.run_in_executor(None, self._owner, peer_port, own_port) or "client"
            # The handshake needs both directions: across a cut it never completes.
            while not (links.open(source, target) and links.open(target, source)):
                await links.changed.wait()
            try:
                up_reader, upstream = await asyncio.open_connection(*address)
            except OSError:
                return  # the target is down: the client's connection closes, as a refused one would
            await asyncio.gather(self._pump(reader, upstream, source, target),
                                 self._pump(up_reader, writer, target, source))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for end in (writer, upstream):
                if end is not None:
                    with contextlib.suppress(Exception):
                        end.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, source: str,
                    target: str) -> None:
        """Bytes from ``source`` to ``target``, held while that direction is cut, late while slow."""
        links = self._links
        assert links is not None
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUED_CHUNKS)

        async def read() -> None:
            last_due = 0.0
            while True:
                data = await reader.read(CHUNK)
                delay, jitter = links.slow.get((source, target), (0.0, 0.0))
                due = self._loop.time() + max(0.0, delay + self._random.uniform(-jitter, jitter)) if delay else 0.0
                last_due = max(last_due, due)  # TCP delivers in order, however late
                await queue.put((last_due, data))
                if not data:
                    return

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                while True:
                    while not links.open(source, target):
                        await links.changed.wait()
                    wait = due - self._loop.time()
                    if wait <= 0:
                        break
                    await asyncio.sleep(min(wait, 0.05))  # a cut meanwhile holds it again
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        reading = self._loop.create_task(read())
        try:
            await deliver()
        finally:
            reading.cancel()
            with contextlib.suppress(BaseException):
                await reading

    def _owner(self, peer_port: int, own_port: int) -> str | None:
        """The link end whose process owns the socket connected from ``peer_port`` to ``own_port``."""
        inode = None
        with contextlib.suppress(OSError), open("/proc/net/tcp") as table:
            for line in table.readlines()[1:]:
                fields = line.split()
                local, remote = fields[1], fields[2]
                if int(local.split(":")[1], 16) == peer_port and int(remote.split(":")[1], 16) == own_port:
                    inode = fields[9]
                    break
        if inode is None:
            return None
        wanted = f"socket:[{inode}]"
        for pid, name in self._pids().items():
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                            return name
        return None
