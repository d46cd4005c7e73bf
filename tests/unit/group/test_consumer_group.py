"""KIP-848 consumer groups on the coordinator, with an in-memory store and a manual clock:
reconciliation, fencing, timeouts, static members, persistence and offsets. No I/O."""

from __future__ import annotations

import io
import uuid
from collections.abc import Mapping

from minikafka.group import consumer_records
from minikafka.group.consumer_group import (
    ConsumerGroupConfig,
    ConsumerGroups,
    CurrentAssignment,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
    TopicInfo,
    reconcile,
)
from minikafka.group.coordinator import CommitEntry, CoordinatorConfig, GroupCoordinator
from minikafka.group.schemas import CONSUMER_ASSIGNMENT, CONSUMER_SUBSCRIPTION
from protocol.errors import ErrorCode
from tests.unit.group.helpers import (
    ManualScheduler,
    MemoryStore,
    join_request,
    make_coordinator,
    subscription,
)

T = uuid.UUID(int=7)
U = uuid.UUID(int=8)
TOPICS = {"t": TopicInfo(T, "t", 4), "u": TopicInfo(U, "u", 2), "__consumer_offsets": TopicInfo(uuid.UUID(int=9),
                                                                                                  "__consumer_offsets", 3)}
SESSION_MS, REBALANCE_MS = 10_000, 20_000


def _coordinator(store: MemoryStore | None = None, scheduler: ManualScheduler | None = None,
                 ) -> tuple[GroupCoordinator, ConsumerGroups, MemoryStore, ManualScheduler]:
    store = store or MemoryStore()
    scheduler = scheduler or ManualScheduler()
    coordinator = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0), store, scheduler,
                                   ConsumerGroupConfig(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500))
    coordinator.load()
    return coordinator, coordinator.consumer_groups, store, scheduler


class Client:
    """What a consumer does: it owns what the last answer gave it, and revokes what it lost."""

    def __init__(self, groups: ConsumerGroups, member_id: str, topics: tuple[str, ...] = ("t",),
                 regex: str | None = None, instance_id: str | None = None, assignor: str | None = None) -> None:
        self.groups, self.member_id, self.epoch = groups, member_id, 0
        self.topics, self.regex, self.instance_id, self.assignor = topics, regex, instance_id, assignor
        self.owned: dict[uuid.UUID, frozenset[int]] = {}

    def beat(self, epoch: int | None = None, owned: Mapping[uuid.UUID, frozenset[int]] | None = None,
             topics: Mapping[str, TopicInfo] = TOPICS) -> HeartbeatResult:
        joining = self.epoch == 0 if epoch is None else epoch == 0
        result = self.groups.heartbeat(HeartbeatRequest(
            "g", self.member_id, self.epoch if epoch is None else epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=REBALANCE_MS if joining else -1,
            subscribed_topic_names=(() if self.regex else self.topics) if joining else None,
            subscribed_topic_regex=self.regex if joining else None, server_assignor=self.assignor,
            owned=self.owned if owned is None else owned, client_id=self.member_id), topics)
        if result.error == ErrorCode.NONE:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = dict(result.assignment)
        return result

    def partitions(self) -> set[int]:
        return set(self.owned.get(T, ()))


def _no_partition_twice(clients: list[Client]) -> None:
    seen: set[tuple[uuid.UUID, int]] = set()
    for client in clients:
        mine = {(topic, p) for topic, parts in client.owned.items() for p in parts}
        assert not seen & mine, f"{client.member_id} owns a partition another member owns"
        seen |= mine


def _settle(clients: list[Client], rounds: int = 6) -> None:
    for _ in range(rounds):
        for client in clients:
            assert client.beat().error == ErrorCode.NONE
            _no_partition_twice(clients)


def test_a_partition_goes_to_its_new_owner_only_after_the_old_one_revoked_it() -> None:
    _, groups, _, _ = _coordinator()
    a, b = Client(groups, "a"), Client(groups, "b")
    first = a.beat()
    assert (first.error, first.member_epoch, a.partitions()) == (ErrorCode.NONE, 1, {0, 1, 2, 3})
    joined = b.beat()
    # b is in the new epoch but gets nothing a still owns.
    assert joined.member_epoch == 2 and b.partitions() == set()
    group = groups.groups["g"]
    revoking = set(group.targets["a"].get(T, ())) ^ {0, 1, 2, 3}
    # a's heartbeat that still owns everything: told to keep only its target, epoch unchanged.
    answer = a.beat()
    assert answer.member_epoch == 1 and a.partitions() == {0, 1, 2, 3} - revoking
    assert groups.groups["g"].member_assignment("a").state == MemberState.UNREVOKED_PARTITIONS
    assert b.beat().assignment is None and b.partitions() == set()  # a has not acknowledged yet
    assert a.beat().member_epoch == 2  # its owned partitions show the revocation done
    b.beat()
    assert b.partitions() == revoking
    _no_partition_twice([a, b])
    assert groups.groups["g"].state().value == "Stable"


def test_members_leaving_hand_their_partitions_to_the_others() -> None:
    _, groups, _, _ = _coordinator()
    clients = [Client(groups, name) for name in "abc"]
    _settle(clients)
    assert sorted(len(c.partitions()) for c in clients) == [1, 1, 2]
    left = clients[0].beat(epoch=-1)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    _settle(clients[1:])
    assert clients[1].partitions() | clients[2].partitions() == {0, 1, 2, 3}


def test_stale_and_unknown_members_are_fenced() -> None:
    _, groups, _, _ = _coordinator()
    a, b = Client(groups, "a"), Client(groups, "b")
    _settle([a, b])
    assert a.beat(epoch=a.epoch + 1).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert a.beat(epoch=a.epoch - 1, owned={T: frozenset({0, 1, 2, 3})}).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert Client(groups, "nobody").beat(epoch=3).error == ErrorCode.UNKNOWN_MEMBER_ID
    # A member that missed the answer moving it on may come back with its previous epoch.
    previous = groups.groups["g"].member_assignment("b").previous_member_epoch
    assert b.beat(epoch=previous, owned={}).error == ErrorCode.NONE


def test_a_silent_member_expires_and_one_that_does_not_revoke_is_removed() -> None:
    _, groups, _, scheduler = _coordinator()
    a, b = Client(groups, "a"), Client(groups, "b")
    _settle([a, b])
    scheduler.advance(SESSION_MS - 1)
    b.beat()
    scheduler.advance(2)
    assert set(groups.groups["g"].members) == {"b"}
    b.beat()
    assert b.partitions() == {0, 1, 2, 3}
    # c joins; b must revoke half but never acknowledges: it is removed after its rebalance timeout.
    c = Client(groups, "c")
    c.beat()
    b.beat()
    assert groups.groups["g"].member_assignment("b").state == MemberState.UNREVOKED_PARTITIONS
    for _ in range(REBALANCE_MS // 5000):
        scheduler.advance(5000)
        c.beat()
        b.beat(owned={T: frozenset({0, 1, 2, 3})})  # still owns what it should give up
    assert "b" not in groups.groups["g"].members
    c.beat()
    assert c.partitions() == {0, 1, 2, 3}


def test_a_static_member_comes_back_under_a_new_id_with_its_partitions() -> None:
    _, groups, _, _ = _coordinator()
    a, b = Client(groups, "a1", instance_id="host-a"), Client(groups, "b", instance_id="host-b")
    _settle([a, b])
    held, epoch = a.partitions(), groups.groups["g"].epoch
    assert Client(groups, "a2", instance_id="host-a").beat().error == ErrorCode.UNRELEASED_INSTANCE_ID
    assert a.beat(epoch=-2).member_epoch == -2
    back = Client(groups, "a2", instance_id="host-a")
    answer = back.beat()
    assert answer.error == ErrorCode.NONE and back.partitions() == held
    assert groups.groups["g"].epoch == epoch and "a1" not in groups.groups["g"].members


def test_regex_subscriptions_skip_internal_topics_and_match_whole_names() -> None:
    _, groups, _, _ = _coordinator()
    client = Client(groups, "a", regex=".*")
    client.beat()
    assert set(client.owned) == {T, U}
    other = Client(groups, "b", regex="t|x")
    other.beat()
    assert set(groups.groups["g"].targets["b"]) <= {T}
    bad = Client(groups, "c", regex="(").beat()
    assert bad.error == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_new_partitions_bump_the_group_epoch() -> None:
    _, groups, _, _ = _coordinator()
    client = Client(groups, "a")
    client.beat()
    grown = {**TOPICS, "t": TopicInfo(T, "t", 6)}
    client.beat(topics=grown)
    client.beat(topics=grown)
    assert client.partitions() == set(range(6)) and client.epoch == 2


def test_the_group_survives_a_coordinator_failover() -> None:
    coordinator, groups, store, scheduler = _coordinator()
    a, b = Client(groups, "a"), Client(groups, "b")
    a.beat()
    b.beat()
    a.beat()  # a is revoking now
    before = groups.groups["g"]
    _, loaded, _, _ = _coordinator(store, ManualScheduler(scheduler.now))
    after = loaded.groups["g"]
    assert (after.epoch, after.target_epoch, after.targets, after.current, after.members, after.topics) == (
        before.epoch, before.target_epoch, before.targets, before.current, before.members, before.topics)
    a.groups = b.groups = loaded
    _settle([a, b])
    assert a.partitions() | b.partitions() == {0, 1, 2, 3}


def test_records_are_kafkas_types() -> None:
    _, groups, store, _ = _coordinator()
    Client(groups, "a").beat()
    types = [int.from_bytes(r.key[:2], "big") for records in store.records.values() for r in records if r.key]
    assert set(types) == {3, 4, 5, 6, 7, 8}
    value = next(r.value for records in store.records.values() for r in records
                 if r.key and r.key[:2] == b"\x00\x08" and r.value)
    decoded = consumer_records.decode(next(r.key for records in store.records.values() for r in records
                                           if r.key and r.key[:2] == b"\x00\x08"), value)
    assert decoded.member_id == "a" and decoded.value is not None and decoded.value.member_epoch == 1


def test_offset_commits_need_the_members_current_epoch() -> None:
    coordinator, groups, _, _ = _coordinator()
    client = Client(groups, "a")
    client.beat()
    entry = {("t", 0): CommitEntry(10, -1, "")}
    assert coordinator.commit_offsets("g", client.epoch, "a", None, entry) == {("t", 0): ErrorCode.NONE}
    assert coordinator.commit_offsets("g", client.epoch - 1, "a", None, entry) == {
        ("t", 0): ErrorCode.STALE_MEMBER_EPOCH}
    assert coordinator.commit_offsets("g", 1, "ghost", None, entry) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert coordinator.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 10  # type: ignore[union-attr]


def test_offset_fetches_of_a_member_need_its_current_epoch() -> None:
    coordinator, groups, _, _ = _coordinator()
    client = Client(groups, "a")
    client.beat()
    coordinator.commit_offsets("g", client.epoch, "a", None, {("t", 0): CommitEntry(10, -1, "")})

    def fetched(member_id: str | None, member_epoch: int) -> ErrorCode:
        return coordinator.fetch_offsets("g", [("t", 0)], False, member_id, member_epoch)[0]

    assert fetched("a", client.epoch) == ErrorCode.NONE
    assert fetched(None, -1) == ErrorCode.NONE  # an admin, or a consumer without group management
    assert fetched("a", client.epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert fetched("a", client.epoch + 1) == ErrorCode.FENCED_MEMBER_EPOCH
    assert fetched("ghost", client.epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.fetch_offsets("g", None, False, "a", client.epoch - 1) == (ErrorCode.STALE_MEMBER_EPOCH, {})


def test_listing_describing_and_deleting() -> None:
    coordinator, groups, _, _ = _coordinator()
    client = Client(groups, "a")
    client.beat()
    assert coordinator.list_groups() == [
        {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable", "group_type": "consumer"}]
    assert coordinator.list_groups(types=["classic"]) == []
    assert coordinator.describe_group("g") == (ErrorCode.NONE, None)
    assert coordinator.delete_groups(["g"]) == {"g": ErrorCode.NON_EMPTY_GROUP}
    client.beat(epoch=-1)
    assert coordinator.list_groups(states=["empty"])[0]["group_state"] == "Empty"
    assert coordinator.delete_groups(["g"]) == {"g": ErrorCode.NONE}
    assert coordinator.list_groups() == []


def test_reconcile_keeps_a_partition_another_member_still_holds() -> None:
    current = CurrentAssignment(3, 2, MemberState.STABLE, {T: frozenset({0})}, {})
    nxt = reconcile(current, 4, {T: frozenset({0, 1})}, {T: frozenset({0})}, lambda topic, p: p == 1)
    assert (nxt.member_epoch, nxt.state, nxt.assigned) == (4, MemberState.UNRELEASED_PARTITIONS, {T: frozenset({0})})
    released = reconcile(nxt, 4, {T: frozenset({0, 1})}, {T: frozenset({0})}, lambda topic, p: False)
    assert (released.state, released.assigned) == (MemberState.STABLE, {T: frozenset({0, 1})})


def test_without_the_consumer_protocol_a_heartbeat_is_refused() -> None:
    store, scheduler = MemoryStore(), ManualScheduler()
    coordinator = GroupCoordinator(CoordinatorConfig(), store, scheduler, ConsumerGroupConfig(enabled=False))
    result = Client(coordinator.consumer_groups, "a").beat()
    assert result.error == ErrorCode.UNSUPPORTED_VERSION and "group.coordinator.rebalance.protocols" in (
        result.message or "")
    assert not any(store.records.values())


def test_a_bad_first_heartbeat_is_an_invalid_request_that_says_why() -> None:
    _, groups, _, _ = _coordinator()
    no_subscription = groups.heartbeat(HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1000, owned={}), TOPICS)
    assert no_subscription.error == ErrorCode.INVALID_REQUEST and "Subscribed" in (no_subscription.message or "")
    no_id = groups.heartbeat(HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1000, owned={},
                                              subscribed_topic_names=("t",)), TOPICS)
    assert no_id.error == ErrorCode.INVALID_REQUEST and "MemberId" in (no_id.message or "")
    unknown = groups.heartbeat(HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1000, owned={},
                                                subscribed_topic_names=("t",), server_assignor="sticky"), TOPICS)
    assert unknown.error == ErrorCode.UNSUPPORTED_ASSIGNOR


async def test_an_empty_group_changes_protocol_with_its_next_member_and_keeps_its_offsets() -> None:
    coordinator, groups, store, scheduler = _coordinator()
    classic = await coordinator.join_group(join_request("g"))
    joined = await coordinator.join_group(join_request("g", classic["member_id"]))
    assert joined["error_code"] == ErrorCode.NONE
    client = Client(groups, "a")
    coordinator.leave_group("g", [(joined["member_id"], None)])
    coordinator.commit_offsets("g", -1, "", None, {("t", 0): CommitEntry(5, -1, "")})
    assert client.beat().error == ErrorCode.NONE
    assert coordinator.list_groups() == [
        {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable", "group_type": "consumer"}]
    # A classic member joins the consumer group as one of its members while it has some; once it
    # is empty, the group goes back to classic.
    as_member = await coordinator.join_group(join_request("g"))
    assert as_member["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and "g" in groups.groups
    client.beat(epoch=-1)
    again = await coordinator.join_group(join_request("g"))
    assert again["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    assert coordinator.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5  # type: ignore[union-attr]
    _, reloaded, _, _ = _coordinator(store, ManualScheduler(scheduler.now))
    assert "g" not in reloaded.groups


def _owned_subscription(topic: str, partitions: set[int]) -> bytes:
    return CONSUMER_SUBSCRIPTION.encode(1, {"topics": [topic], "user_data": None,
                                            "owned_partitions": [{"topic": topic, "partitions": sorted(partitions)}]})


def _assigned(assignment: bytes) -> set[int]:
    body = CONSUMER_ASSIGNMENT.decode_body(0, io.BytesIO(assignment[2:]))
    return {p for entry in body.assigned_partitions for p in entry.partitions}


async def _classic_member_holding_everything(coordinator: GroupCoordinator) -> tuple[str, int]:
    """A classic group "g" of one cooperative-sticky member, given all of t: its id and generation."""
    first = await coordinator.join_group(join_request("g"))
    classic_id = first["member_id"]
    joined = await coordinator.join_group(join_request("g", classic_id, protocols=[("cooperative-sticky",
                                                                                       subscription("t"))]))
    assignment = CONSUMER_ASSIGNMENT.encode(0, {"assigned_partitions": [{"topic": "t", "partitions": [0, 1, 2, 3]}],
                                                "user_data": None})
    synced = await coordinator.sync_group("g", joined["generation_id"], classic_id, None, None, None,
                                          [(classic_id, assignment)])
    assert synced["error_code"] == ErrorCode.NONE
    return classic_id, joined["generation_id"]


async def test_a_classic_group_is_upgraded_online_as_a_member_joins_with_the_consumer_protocol() -> None:
    store, scheduler = MemoryStore(), ManualScheduler()
    coordinator = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0), store, scheduler,
                                   ConsumerGroupConfig(session_timeout_ms=SESSION_MS), lambda: TOPICS)
    groups = coordinator.consumer_groups
    classic_id, generation = await _classic_member_holding_everything(coordinator)
    coordinator.commit_offsets("g", generation, classic_id, None, {("t", 0): CommitEntry(3, -1, "")})

    newcomer = Client(groups, "n")
    assert newcomer.beat().error == ErrorCode.NONE  # the group is now a consumer group with both members
    group = groups.groups["g"]
    assert set(group.members) == {classic_id, "n"} and group.members[classic_id].is_classic
    assert newcomer.partitions() == set()  # the classic member still holds everything
    assert coordinator.list_groups()[0]["group_type"] == "consumer"
    # The classic member is told to rejoin; it gets what it keeps, revokes the rest, rejoins owning that.
    assert coordinator.heartbeat("g", generation, classic_id, None) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = await coordinator.join_group(join_request(
        "g", classic_id, protocols=[("cooperative-sticky", _owned_subscription("t", {0, 1, 2, 3}))]))
    assert rejoin["error_code"] == ErrorCode.NONE and rejoin["generation_id"] == generation
    kept = _assigned((await coordinator.sync_group("g", generation, classic_id, None, "consumer",
                                                   "cooperative-sticky", []))["assignment"])
    assert len(kept) == 2
    assert newcomer.beat().assignment is None  # not before the classic member revoked
    again = await coordinator.join_group(join_request(
        "g", classic_id, protocols=[("cooperative-sticky", _owned_subscription("t", kept))]))
    assert again["generation_id"] == groups.groups["g"].target_epoch
    assert coordinator.heartbeat("g", again["generation_id"], classic_id, None) == ErrorCode.NONE
    newcomer.beat()
    assert newcomer.partitions() == {0, 1, 2, 3} - kept
    # Offsets: committed by the classic member at its member epoch; kept through the upgrade.
    assert coordinator.commit_offsets("g", again["generation_id"], classic_id, None,
                                      {("t", 0): CommitEntry(4, -1, "")}) == {("t", 0): ErrorCode.NONE}
    assert coordinator.commit_offsets("g", generation - 1, classic_id, None,
                                      {("t", 0): CommitEntry(4, -1, "")}) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    # A failover keeps the classic member as such.
    reloaded = GroupCoordinator(CoordinatorConfig(), store, ManualScheduler(scheduler.now), ConsumerGroupConfig(),
                                lambda: TOPICS)
    reloaded.load()
    assert reloaded.consumer_groups.groups["g"].members == groups.groups["g"].members
    left = coordinator.leave_group("g", [(classic_id, None)])
    assert left == (ErrorCode.NONE, [ErrorCode.NONE]) and set(groups.groups["g"].members) == {"n"}


async def test_without_the_migration_policy_a_classic_group_with_members_is_not_upgraded() -> None:
    coordinator = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0), MemoryStore(), ManualScheduler(),
                                   ConsumerGroupConfig(migration_policy="disabled"), lambda: TOPICS)
    first = await coordinator.join_group(join_request("g"))
    await coordinator.join_group(join_request("g", first["member_id"]))
    assert Client(coordinator.consumer_groups, "n").beat().error == ErrorCode.GROUP_ID_NOT_FOUND


def test_an_empty_group_goes_with_its_last_offsets() -> None:
    coordinator, groups, store, scheduler = _coordinator()
    for group_id in ("kept", "gone"):
        groups.heartbeat(HeartbeatRequest(group_id, f"{group_id}-member", 0, rebalance_timeout_ms=1000, owned={},
                                          subscribed_topic_names=("t",)), TOPICS)
    coordinator.commit_offsets("kept", -1, "", None, {("t", 0): CommitEntry(1, -1, "")})
    assert coordinator.commit_offsets("kept", -1, "", None, {("t", 0): CommitEntry(1, -1, "")}) == {
        ("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}  # only members commit while it has some
    for group_id in ("kept", "gone"):
        groups.heartbeat(HeartbeatRequest(group_id, f"{group_id}-member", -1), TOPICS)
    coordinator.commit_offsets("kept", -1, "", None, {("t", 0): CommitEntry(1, -1, "")})
    coordinator.expire_offsets()
    assert set(groups.groups) == {"kept"}
    _, reloaded, _, _ = _coordinator(store, ManualScheduler(scheduler.now))
    assert set(reloaded.groups) == {"kept"}


async def _upgraded_group(policy: str = "bidirectional", instance: str | None = None,
                          ) -> tuple[GroupCoordinator, MemoryStore, ManualScheduler, str, Client]:
    """A classic group of one cooperative member holding t's 4 partitions, upgraded online by a
    consumer-protocol member; once settled, each holds 2."""
    store, scheduler = MemoryStore(), ManualScheduler()
    coordinator = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0), store, scheduler,
                                   ConsumerGroupConfig(session_timeout_ms=SESSION_MS, migration_policy=policy),
                                   lambda: TOPICS)
    coordinator.load()
    classic_id, _ = await _classic_member_holding_everything(coordinator)
    newcomer = Client(coordinator.consumer_groups, "n", instance_id=instance)
    newcomer.beat()
    rejoin = await coordinator.join_group(join_request(
        "g", classic_id, protocols=[("cooperative-sticky", _owned_subscription("t", {0, 1, 2, 3}))]))
    kept = _assigned((await coordinator.sync_group("g", rejoin["generation_id"], classic_id, None, "consumer",
                                                   "cooperative-sticky", []))["assignment"])
    await coordinator.join_group(join_request(
        "g", classic_id, protocols=[("cooperative-sticky", _owned_subscription("t", kept))]))
    newcomer.beat()
    assert newcomer.partitions() == {0, 1, 2, 3} - kept and len(kept) == 2
    return coordinator, store, scheduler, classic_id, newcomer


async def _rejoins_as_classic(coordinator: GroupCoordinator, classic_id: str, owned: set[int]) -> set[int]:
    """The classic member, told to rebalance, rejoins a classic group as its leader, and assigns."""
    group = coordinator.groups["g"]
    assert coordinator.heartbeat("g", group.generation_id, classic_id, None) == ErrorCode.REBALANCE_IN_PROGRESS
    joined = await coordinator.join_group(join_request(
        "g", classic_id, protocols=[("cooperative-sticky", _owned_subscription("t", owned))]))
    assert joined["error_code"] == ErrorCode.NONE and joined["leader"] == classic_id and len(joined["members"]) == 1
    assignment = CONSUMER_ASSIGNMENT.encode(0, {"assigned_partitions": [{"topic": "t", "partitions": [0, 1, 2, 3]}],
                                                "user_data": None})
    synced = await coordinator.sync_group("g", joined["generation_id"], classic_id, None, "consumer",
                                          "cooperative-sticky", [(classic_id, assignment)])
    assert synced["error_code"] == ErrorCode.NONE
    assert coordinator.heartbeat("g", joined["generation_id"], classic_id, None) == ErrorCode.NONE
    return _assigned(synced["assignment"])


async def test_a_consumer_group_is_downgraded_online_when_its_last_consumer_protocol_member_leaves() -> None:
    coordinator, store, scheduler, classic_id, newcomer = await _upgraded_group()
    groups = coordinator.consumer_groups
    epoch = groups.groups["g"].epoch
    coordinator.commit_offsets("g", newcomer.epoch, "n", None, {("t", 1): CommitEntry(7, -1, "")})
    assert newcomer.beat(epoch=-1).error == ErrorCode.NONE
    # A classic group again, at the consumer group's epoch, holding its one classic member and the
    # group's offsets; it rebalances, so the member takes the leaver's partitions.
    assert "g" not in groups.groups
    assert coordinator.list_groups() == [
        {"group_id": "g", "protocol_type": "consumer", "group_state": "PreparingRebalance", "group_type": "classic"}]
    group = coordinator.groups["g"]
    assert (set(group.members), group.generation_id, group.protocol_name) == ({classic_id}, epoch,
                                                                              "cooperative-sticky")
    assert _assigned(group.members[classic_id].assignment) == {0, 1, 2, 3} - newcomer.partitions()
    assert coordinator.fetch_offsets("g", [("t", 1)])[1][("t", 1)].offset == 7  # type: ignore[union-attr]
    # A failover finds it classic too.
    reloaded, _, _ = make_coordinator(store, ManualScheduler(scheduler.now))
    assert "g" not in reloaded.consumer_groups.groups and set(reloaded.groups["g"].members) == {classic_id}
    assert await _rejoins_as_classic(coordinator, classic_id, _assigned(group.members[classic_id].assignment)) == {
        0, 1, 2, 3}
    # And it can be upgraded again.
    again = Client(groups, "n2")
    assert again.beat().error == ErrorCode.NONE and set(groups.groups["g"].members) == {classic_id, "n2"}


async def test_a_consumer_group_is_downgraded_when_its_last_consumer_protocol_member_is_fenced() -> None:
    coordinator, _, scheduler, classic_id, newcomer = await _upgraded_group()
    held = _assigned(coordinator.consumer_groups.classic_sync(
        "g", coordinator.consumer_groups.groups["g"].member_assignment(classic_id).member_epoch, classic_id, None,
        None)["assignment"])
    for _ in range(SESSION_MS // 2000 + 1):  # the consumer-protocol member goes silent; the classic one beats
        scheduler.advance(2000)
        if "g" in coordinator.consumer_groups.groups:
            generation = coordinator.consumer_groups.groups["g"].member_assignment(classic_id).member_epoch
            assert coordinator.heartbeat("g", generation, classic_id, None) == ErrorCode.NONE
    assert "g" not in coordinator.consumer_groups.groups
    assert await _rejoins_as_classic(coordinator, classic_id, held) == {0, 1, 2, 3}


async def test_without_the_downgrade_policy_the_classic_members_stay_in_the_consumer_group() -> None:
    coordinator, _, _, classic_id, newcomer = await _upgraded_group("upgrade")
    newcomer.beat(epoch=-1)
    assert set(coordinator.consumer_groups.groups["g"].members) == {classic_id}


async def test_a_static_member_back_with_the_classic_protocol_replaces_its_old_self() -> None:
    """Restarted with the classic protocol, a static member takes its old self's place and
    partitions; when that was the last consumer-protocol member, the group becomes classic again
    (Kafka's validateOnlineDowngradeWithReplacedMemberId)."""
    coordinator, _, _, classic_id, newcomer = await _upgraded_group(instance="i")
    held = newcomer.partitions()
    assert newcomer.beat(epoch=-2).error == ErrorCode.NONE  # it leaves for a restart
    joined = await coordinator.join_group(join_request("g", instance="i", protocols=[("cooperative-sticky",
                                                                                       subscription("t"))]))
    assert joined["error_code"] == ErrorCode.NONE and joined["member_id"] != "n"
    assert "g" not in coordinator.consumer_groups.groups
    group = coordinator.groups["g"]
    assert set(group.members) == {classic_id, joined["member_id"]} and group.static_members == {
        "i": joined["member_id"]}
    assert _assigned(group.members[joined["member_id"]].assignment) == held


def test_a_static_member_back_with_the_classic_protocol_is_one_member_of_the_consumer_group() -> None:
    coordinator = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0), MemoryStore(), ManualScheduler(),
                                   ConsumerGroupConfig(session_timeout_ms=SESSION_MS), lambda: TOPICS)
    coordinator.load()
    groups = coordinator.consumer_groups
    other, static = Client(groups, "n"), Client(groups, "s", instance_id="i")
    _settle([other, static])
    held = static.partitions()
    static.beat(epoch=-2)
    joined = coordinator.consumer_groups.classic_join(join_request("g", instance="i", protocols=[(
        "cooperative-sticky", subscription("t"))]))
    assert joined["error_code"] == ErrorCode.NONE
    group = groups.groups["g"]
    assert set(group.members) == {"n", joined["member_id"]} and group.static_member("i") == joined["member_id"]
    assert set(group.member_assignment(joined["member_id"]).assigned[T]) == held
    # Its old self is gone: a heartbeat of it is refused.
    assert static.beat(epoch=static.epoch).error == ErrorCode.UNKNOWN_MEMBER_ID
