"""ZooKeeper's multiRead request (opcode 22, ZooKeeper 3.6 and later): the data of many znodes
asked in one request and answered in one response, each read on its own (a missing znode fails
only its own read, unlike a multi's all-or-nothing writes).

kazoo has no such call, but sends any request object with a ``type``, ``serialize()`` and
``deserialize(buffer, offset)``; this is one. Read one by one, the 10,000 partition states a
controller reads when it takes over cost a kazoo request each: seconds of Python before it could
tell any broker anything. No I/O here.
"""

from __future__ import annotations

from kazoo.protocol.serialization import (
    GetData,
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
)
from kazoo.protocol.states import ZnodeStat

MULTI_READ = 22
ERROR_RESULT = -1
NO_NODE = -101
# Reads per request: each answer (a partition state, a topic's assignment) is well under 1 KiB, so
# a response stays far below ZooKeeper's default jute.maxbuffer of 1 MiB.
READS_PER_REQUEST = 500

# One read's outcome: the znode's data and stat, or ZooKeeper's error code for it.
ReadResult = tuple[bytes | None, ZnodeStat] | int


class MultiRead:
    """getData of each of ``paths`` (full paths, chroot included), without watches."""

    type = MULTI_READ

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def serialize(self) -> bytes:
        request = bytearray()
        for path in self.paths:
            request += multiheader_struct.pack(GetData.type, False, -1)
            request += GetData(path, None).serialize()
        request += multiheader_struct.pack(-1, True, -1)
        return bytes(request)

    def deserialize(self, buffer: bytes, offset: int) -> list[ReadResult]:
        results: list[ReadResult] = []
        header, offset = MultiHeader.deserialize(buffer, offset)
        while not header.done:
            if header.type == GetData.type:
                data, offset = read_buffer(buffer, offset)
                results.append((data, ZnodeStat._make(stat_struct.unpack_from(buffer, offset))))
                offset += stat_struct.size
            elif header.type == ERROR_RESULT:
                results.append(int_struct.unpack_from(buffer, offset)[0])
                offset += int_struct.size
            else:
                raise ValueError(f"multiRead answered an operation of type {header.type}")
            header, offset = MultiHeader.deserialize(buffer, offset)
        if len(results) != len(self.paths):
            raise ValueError(f"multiRead answered {len(results)} reads of {len(self.paths)}")
        return results
