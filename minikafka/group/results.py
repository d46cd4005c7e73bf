"""What the group coordinator answers, as typed results; the handlers turn them into wire bodies.

TypedDicts (not dataclasses) because the coordinator's unit tests and its waiting futures
read them by key; mypy still rejects a misspelt or missing key where one is built.
"""

from __future__ import annotations

from typing import TypedDict

from protocol.errors import ErrorCode


class JoinedMember(TypedDict):
    """A member as the leader sees it in the JoinGroup answer, to compute the assignment."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


class JoinResult(TypedDict):
    error_code: ErrorCode
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    skip_assignment: bool
    member_id: str
    members: list[JoinedMember]  # filled for the leader only


class SyncResult(TypedDict):
    error_code: ErrorCode
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


class GroupListing(TypedDict):
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


class DescribedMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes  # empty unless the group is Stable
    member_assignment: bytes  # empty unless the group is Stable


class GroupDescription(TypedDict):
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str  # the chosen protocol's name
    members: list[DescribedMember]
