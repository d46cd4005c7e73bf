"""What a follower's catch-up can reach on this machine with no broker at all (make bench's catch-up).

A sender process answers requests over a 127.0.0.1 TCP connection with the next 1 MiB of a
partition's segment files, by sendfile, as a leader answers a follower's Fetch
(replica.fetch.max.bytes); the receiver keeps two requests in flight, as a follower fetching
ahead does, and checks a CRC-32C over every byte it receives, as a follower checks every batch's.
There is no protocol, no index and no Python work per record: the time left is the copies, the
CRC and the loopback TCP. Two receivers:

- ``recv``: ``recv_into`` one reused buffer, CRC it, ``pwrite`` it: the copies the follower makes.
- ``splice``: socket to pipe to file with ``splice`` (the bytes never enter this process), then
  the CRC over a read-only mapping of what was written: the fewest copies a receiver that checks
  every byte can make from user space.

Usage (the sender, started by ``bare_receive``): python bench/bare_receive.py PORT FILE...
"""

from __future__ import annotations

import fcntl
import mmap
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import crc32c

ANSWER_BYTES = 1 << 20  # replica.fetch.max.bytes' default
REQUEST = struct.Struct(">i")  # bytes asked for
ANSWER = struct.Struct(">i")  # bytes that follow
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ from Python 3.10 on Linux, spelt out for mypy


def send(port: int, files: list[Path]) -> None:
    """Answer each request with the next bytes of ``files``, never past the end of one file."""
    with socket.create_connection(("127.0.0.1", port)) as connection:
        requests = connection.makefile("rb")
        for source in files:
            with open(source, "rb") as data:
                position, size = 0, os.fstat(data.fileno()).st_size
                while position < size:
                    (asked,) = REQUEST.unpack(requests.read(REQUEST.size))
                    count = min(asked, size - position)
                    connection.sendall(ANSWER.pack(count))
                    connection.sendfile(data, position, count)
                    position += count


def bare_receive(files: list[Path], root: Path, how: str) -> float:
    """Seconds to receive ``files`` from a sender process into a temporary dir of ``root`` the
    ``how`` way (``recv`` or ``splice``), starting with nothing dirty to write back."""
    receive = {"recv": _receive_recv, "splice": _receive_splice}[how]
    with tempfile.TemporaryDirectory(dir=root) as target, socket.create_server(("127.0.0.1", 0)) as server:
        sender = subprocess.Popen([sys.executable, __file__, str(server.getsockname()[1]), *map(str, files)])
        try:
            connection, _ = server.accept()
            with connection:
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                os.sync()
                started = time.monotonic()
                for source in files:
                    fd = os.open(Path(target) / source.name, os.O_RDWR | os.O_CREAT, 0o644)
                    try:
                        receive(connection, fd, source.stat().st_size)
                    finally:
                        os.close(fd)
                took = time.monotonic() - started
        finally:
            if sender.wait(60) != 0:
                raise RuntimeError(f"the sender exited with {sender.returncode}")
    return took


def _answers(connection: socket.socket, size: int) -> list[int]:
    """Sizes of the answers that bring ``size`` bytes, the first two requested."""
    sizes = [min(ANSWER_BYTES, size - start) for start in range(0, size, ANSWER_BYTES)]
    for asked in sizes[:2]:
        connection.sendall(REQUEST.pack(asked))
    return sizes


def _answer_header(connection: socket.socket, sizes: list[int], index: int) -> int:
    """Read one answer's header and ask for the answer after the next one (two in flight)."""
    header = bytearray(ANSWER.size)
    _recv_exactly(connection, memoryview(header))
    if index + 2 < len(sizes):
        connection.sendall(REQUEST.pack(sizes[index + 2]))
    return int(ANSWER.unpack(header)[0])


def _recv_exactly(connection: socket.socket, view: memoryview) -> None:
    received = 0
    while received < len(view):
        count = connection.recv_into(view[received:])
        if not count:
            raise ConnectionError("the sender closed early")
        received += count


def _receive_recv(connection: socket.socket, fd: int, size: int) -> None:
    buffer = memoryview(bytearray(ANSWER_BYTES))
    position = 0
    sizes = _answers(connection, size)
    for index in range(len(sizes)):
        region = buffer[:_answer_header(connection, sizes, index)]
        _recv_exactly(connection, region)
        crc32c.crc32c(region)
        position += os.pwrite(fd, region, position)


def _receive_splice(connection: socket.socket, fd: int, size: int) -> None:
    pipe_out, pipe_in = os.pipe()
    try:
        fcntl.fcntl(pipe_in, F_SETPIPE_SZ, ANSWER_BYTES)
        position = 0
        sizes = _answers(connection, size)
        for index in range(len(sizes)):
            left = _answer_header(connection, sizes, index)
            while left:
                in_pipe = os.splice(connection.fileno(), pipe_in, left)
                if not in_pipe:
                    raise ConnectionError("the sender closed early")
                left -= in_pipe
                while in_pipe:
                    written = os.splice(pipe_out, fd, in_pipe, offset_dst=position)
                    in_pipe -= written
                    position += written
    finally:
        os.close(pipe_out)
        os.close(pipe_in)
    if not size:
        return
    with mmap.mmap(fd, size, prot=mmap.PROT_READ) as written_map:
        view = memoryview(written_map)
        for start in range(0, size, ANSWER_BYTES):
            crc32c.crc32c(view[start:start + ANSWER_BYTES])
        view.release()


if __name__ == "__main__":
    send(int(sys.argv[1]), [Path(name) for name in sys.argv[2:]])
