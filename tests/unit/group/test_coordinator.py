"""The group coordinator's state machine, driven by hand: no sockets, no disk, a manual clock."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

from minikafka.coordinator.topic import TxnProducer
from minikafka.group.coordinator import CommitEntry, CoordinatorConfig, GroupCoordinator, JoinRequest
from minikafka.group.group import GroupState
from minikafka.group.membership import LoopScheduler
from protocol.errors import ErrorCode

from .helpers import ManualScheduler, MemoryStore, join_request, make_coordinator, subscription

E = ErrorCode


async def _join_many(coordinator: GroupCoordinator, scheduler: ManualScheduler, requests: list[JoinRequest],
                     advance_ms: int = 0) -> list[dict[str, Any]]:
    tasks = [asyncio.create_task(coordinator.join_group(r)) for r in requests]
    await asyncio.sleep(0)  # every task runs up to its wait for the rebalance
    scheduler.advance(advance_ms)
    return list(await asyncio.gather(*tasks))


async def _member_id(coordinator: GroupCoordinator, request: JoinRequest) -> str:
    first = await coordinator.join_group(request)
    assert first["error_code"] == E.MEMBER_ID_REQUIRED and first["member_id"]
    return first["member_id"]


async def _stable_group(coordinator: GroupCoordinator, scheduler: ManualScheduler, count: int,
                        group: str = "g", protocols: list[tuple[str, bytes]] | None = None) -> list[dict[str, Any]]:
    """`count` members joined and synced; returns their join responses (leader first)."""
    ids = [await _member_id(coordinator, join_request(group, client_id=f"c{i}", protocols=protocols))
           for i in range(count)]
    joined = await _join_many(coordinator, scheduler, [join_request(group, m, protocols=protocols) for m in ids])
    assert {j["error_code"] for j in joined} == {E.NONE}
    leader = next(j for j in joined if j["leader"] == j["member_id"])
    assignments = [(j["member_id"], f"assigned-to-{j['member_id']}".encode()) for j in joined]
    syncs = [asyncio.create_task(coordinator.sync_group(group, j["generation_id"], j["member_id"], None, None, None,
                                                        assignments if j is leader else []))
             for j in joined]
    results = await asyncio.gather(*syncs)
    assert [r["assignment"] for r in results] == [f"assigned-to-{j['member_id']}".encode() for j in joined]
    assert coordinator.groups[group].state == GroupState.STABLE
    return [leader] + [j for j in joined if j is not leader]


async def test_first_member_gets_an_id_then_leads_generation_one() -> None:
    coordinator, store, scheduler = make_coordinator()
    member_id = await _member_id(coordinator, join_request(client_id="app"))
    assert member_id.startswith("app-")
    (joined,) = await _join_many(coordinator, scheduler, [join_request(member_id=member_id)])
    assert joined["error_code"] == E.NONE
    assert (joined["generation_id"], joined["leader"], joined["member_id"]) == (1, member_id, member_id)
    assert joined["protocol_name"] == "range"
    assert joined["members"] == [{"member_id": member_id, "group_instance_id": None, "metadata": subscription("t")}]
    synced = await coordinator.sync_group("g", 1, member_id, None, "consumer", "range", [(member_id, b"mine")])
    assert synced == {"error_code": E.NONE, "protocol_type": "consumer", "protocol_name": "range",
                      "assignment": b"mine"}
    assert coordinator.heartbeat("g", 1, member_id, None) == E.NONE
    assert store.records[coordinator.partition_for("g")], "the assignment was not stored"


async def test_old_join_versions_get_a_member_id_without_a_second_round() -> None:
    coordinator, _, scheduler = make_coordinator()
    (joined,) = await _join_many(coordinator, scheduler, [join_request(v4=False)])
    assert joined["error_code"] == E.NONE and joined["member_id"] and joined["generation_id"] == 1


async def test_initial_delay_gathers_members_into_one_rebalance() -> None:
    coordinator, _, scheduler = make_coordinator(initial_rebalance_delay_ms=3000)
    ids = [await _member_id(coordinator, join_request(client_id=f"c{i}")) for i in range(3)]
    tasks = [asyncio.create_task(coordinator.join_group(join_request(member_id=m))) for m in ids[:2]]
    await asyncio.sleep(0)
    scheduler.advance(2000)
    tasks.append(asyncio.create_task(coordinator.join_group(join_request(member_id=ids[2]))))
    await asyncio.sleep(0)
    scheduler.advance(2000)  # the third newcomer pushed the deadline to 5000 ms
    assert not any(t.done() for t in tasks)
    scheduler.advance(1000)
    joined = await asyncio.gather(*tasks)
    assert {j["generation_id"] for j in joined} == {1}
    leaders = [j for j in joined if j["members"]]
    assert len(leaders) == 1 and len(leaders[0]["members"]) == 3
    assert {j["leader"] for j in joined} == {leaders[0]["member_id"]}


async def test_leave_triggers_rebalance_seen_through_heartbeats() -> None:
    coordinator, _, scheduler = make_coordinator()
    leader, a, b = await _stable_group(coordinator, scheduler, 3)
    error, per_member = coordinator.leave_group("g", [(b["member_id"], None)])
    assert (error, per_member) == (E.NONE, [E.NONE])
    assert coordinator.groups["g"].state == GroupState.PREPARING_REBALANCE
    assert coordinator.heartbeat("g", 1, a["member_id"], None) == E.REBALANCE_IN_PROGRESS
    assert coordinator.heartbeat("g", 1, b["member_id"], None) == E.UNKNOWN_MEMBER_ID
    rejoined = await _join_many(coordinator, scheduler, [join_request(member_id=leader["member_id"]),
                                                         join_request(member_id=a["member_id"])])
    assert {j["generation_id"] for j in rejoined} == {2}
    assert coordinator.leave_group("g", [("nobody", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])


async def test_session_timeout_evicts_a_silent_member() -> None:
    coordinator, _, scheduler = make_coordinator()
    leader, quiet = await _stable_group(coordinator, scheduler, 2)
    for _ in range(2):
        scheduler.advance(4000)
        assert coordinator.heartbeat("g", 1, leader["member_id"], None) == E.NONE
    assert quiet["member_id"] in coordinator.groups["g"].members
    scheduler.advance(2001)  # 10 s without a heartbeat from the quiet one
    assert quiet["member_id"] not in coordinator.groups["g"].members
    assert coordinator.heartbeat("g", 1, leader["member_id"], None) == E.REBALANCE_IN_PROGRESS
    assert coordinator.heartbeat("g", 1, quiet["member_id"], None) == E.UNKNOWN_MEMBER_ID


async def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    coordinator, _, scheduler = make_coordinator()
    leader, follower = await _stable_group(coordinator, scheduler, 2)
    task = asyncio.create_task(coordinator.join_group(join_request(member_id=leader["member_id"])))
    await asyncio.sleep(0)
    for _ in range(3):  # the follower keeps heartbeating but never rejoins
        scheduler.advance(9000)
        coordinator.heartbeat("g", 1, follower["member_id"], None)
    scheduler.advance(4000)  # 31 s: past the 30 s rebalance timeout
    joined = await task
    assert joined["error_code"] == E.NONE and joined["generation_id"] == 2
    assert [m["member_id"] for m in joined["members"]] == [leader["member_id"]]
    assert coordinator.heartbeat("g", 2, follower["member_id"], None) == E.UNKNOWN_MEMBER_ID


async def test_generation_and_membership_checks() -> None:
    coordinator, _, scheduler = make_coordinator()
    leader, follower = await _stable_group(coordinator, scheduler, 2)
    member = follower["member_id"]
    assert coordinator.heartbeat("g", 0, member, None) == E.ILLEGAL_GENERATION
    assert coordinator.heartbeat("g", 1, "stranger", None) == E.UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat("nope", 1, member, None) == E.UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat("", 1, member, None) == E.INVALID_GROUP_ID
    tp = ("t", 0)
    entry = {tp: CommitEntry(5, -1, "")}
    assert coordinator.commit_offsets("g", 0, member, None, entry) == {tp: E.ILLEGAL_GENERATION}
    assert coordinator.commit_offsets("g", 1, "stranger", None, entry) == {tp: E.UNKNOWN_MEMBER_ID}
    assert coordinator.commit_offsets("g", -1, "", None, entry) == {tp: E.UNKNOWN_MEMBER_ID}
    assert coordinator.commit_offsets("never-joined", 3, "m", None, entry) == {tp: E.ILLEGAL_GENERATION}
    assert coordinator.fetch_offsets("g", [tp]) == (E.NONE, {tp: None}), "a refused commit changed something"
    assert coordinator.commit_offsets("g", 1, member, None, entry) == {tp: E.NONE}
    synced = await coordinator.sync_group("g", 7, member, None, None, None, [])
    assert synced["error_code"] == E.ILLEGAL_GENERATION
    # A rebalance in its second phase refuses commits until the new assignment is out.
    tasks = [asyncio.create_task(coordinator.join_group(join_request(member_id=j["member_id"])))
             for j in (leader, follower)]
    await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert coordinator.groups["g"].state == GroupState.COMPLETING_REBALANCE
    assert coordinator.commit_offsets("g", 2, member, None, entry) == {tp: E.REBALANCE_IN_PROGRESS}
    assert coordinator.heartbeat("g", 2, member, None) == E.NONE


async def test_bad_joins_are_refused() -> None:
    coordinator, _, scheduler = make_coordinator()
    assert (await coordinator.join_group(join_request(group="")))["error_code"] == E.INVALID_GROUP_ID
    no_protocols = dataclasses.replace(join_request(group="never"), protocols=[])
    assert (await coordinator.join_group(no_protocols))["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert "never" not in coordinator.groups
    too_short = dataclasses.replace(join_request(), session_timeout_ms=10)
    assert (await coordinator.join_group(too_short))["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert (await coordinator.join_group(join_request(member_id="ghost")))["error_code"] == E.UNKNOWN_MEMBER_ID
    await _stable_group(coordinator, scheduler, 1)
    other = join_request(protocols=[("roundrobin", b"")])
    assert (await coordinator.join_group(other))["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await coordinator.join_group(dataclasses.replace(join_request(), protocols=[])))["error_code"] == (
        E.INCONSISTENT_GROUP_PROTOCOL)
    assert len(coordinator.groups["g"].members) == 1


async def test_the_protocol_all_members_support_is_chosen() -> None:
    coordinator, _, scheduler = make_coordinator()
    both = [("range", b"r"), ("roundrobin", b"rr")]
    only_rr = [("roundrobin", b"rr2")]
    ids = [await _member_id(coordinator, join_request(protocols=p)) for p in (both, only_rr)]
    joined = await _join_many(coordinator, scheduler, [join_request(member_id=ids[0], protocols=both),
                                                       join_request(member_id=ids[1], protocols=only_rr)])
    assert {j["protocol_name"] for j in joined} == {"roundrobin"}
    leader = next(j for j in joined if j["members"])
    assert sorted(m["metadata"] for m in leader["members"]) == [b"rr", b"rr2"]


async def test_group_max_size() -> None:
    coordinator, _, scheduler = make_coordinator(max_group_size=2)
    await _stable_group(coordinator, scheduler, 2)
    assert (await coordinator.join_group(join_request()))["error_code"] == E.GROUP_MAX_SIZE_REACHED


async def test_follower_rejoining_unchanged_keeps_the_generation_but_changed_metadata_rebalances() -> None:
    """Cooperative rebalancing: members rejoin while keeping their partitions; an unchanged
    follower is answered at once, a changed one (revoked partitions) starts a new generation."""
    coordinator, _, scheduler = make_coordinator()
    leader, follower = await _stable_group(coordinator, scheduler, 2)
    same = await coordinator.join_group(join_request(member_id=follower["member_id"]))
    assert (same["error_code"], same["generation_id"], same["members"]) == (E.NONE, 1, [])
    assert coordinator.groups["g"].state == GroupState.STABLE
    changed = [("range", subscription("t", "u"))]
    joined = await _join_many(coordinator, scheduler, [join_request(member_id=follower["member_id"], protocols=changed),
                                                       join_request(member_id=leader["member_id"])])
    assert {j["generation_id"] for j in joined} == {2}
    leader_view = next(j for j in joined if j["members"])
    assert {m["member_id"]: m["metadata"] for m in leader_view["members"]}[follower["member_id"]] == changed[0][1]


async def test_missing_sync_from_the_leader_ends_in_a_new_rebalance() -> None:
    coordinator, _, scheduler = make_coordinator()
    ids = [await _member_id(coordinator, join_request(client_id=f"c{i}")) for i in range(2)]
    joined = await _join_many(coordinator, scheduler, [join_request(member_id=m) for m in ids])
    follower = next(j for j in joined if not j["members"])
    waiting = asyncio.create_task(coordinator.sync_group("g", 1, follower["member_id"], None, None, None, []))
    await asyncio.sleep(0)
    for _ in range(5):  # both stay alive, but the leader never sends its SyncGroup
        scheduler.advance(5000)
        assert not waiting.done()
        for j in joined:
            assert coordinator.heartbeat("g", 1, j["member_id"], None) == E.NONE
    scheduler.advance(5000)  # the rebalance timeout (30 s) since the join completed
    assert (await waiting)["error_code"] == E.REBALANCE_IN_PROGRESS
    group = coordinator.groups["g"]
    assert set(group.members) == {follower["member_id"]} and group.state == GroupState.PREPARING_REBALANCE


async def test_static_member_restart_keeps_assignment_and_fences_the_old_id() -> None:
    coordinator, store, scheduler = make_coordinator(initial_rebalance_delay_ms=100)
    joined = await _join_many(coordinator, scheduler, [join_request(instance="i-1"), join_request(instance="i-2")],
                              advance_ms=100)
    assert all(j["member_id"].startswith("i-") for j in joined), "static members need no MEMBER_ID_REQUIRED round"
    leader = next(j for j in joined if j["members"])
    follower = next(j for j in joined if not j["members"])
    await asyncio.gather(*[
        coordinator.sync_group("g", 1, j["member_id"], "i-1" if j["member_id"].startswith("i-1") else "i-2", None, None,
                               [(x["member_id"], x["member_id"].encode()) for x in joined] if j is leader else [])
        for j in joined])
    instance = "i-1" if follower["member_id"].startswith("i-1") else "i-2"
    restarted = await coordinator.join_group(join_request(instance=instance))
    assert restarted["error_code"] == E.NONE and restarted["generation_id"] == 1
    assert restarted["member_id"] != follower["member_id"]
    assert coordinator.groups["g"].state == GroupState.STABLE, "a static rejoin must not rebalance"
    synced = await coordinator.sync_group("g", 1, restarted["member_id"], instance, None, None, [])
    assert synced["assignment"] == follower["member_id"].encode()
    assert coordinator.heartbeat("g", 1, follower["member_id"], instance) == E.FENCED_INSTANCE_ID
    tp = ("t", 1)
    assert coordinator.commit_offsets("g", 1, follower["member_id"], instance,
                                      {tp: CommitEntry(1, -1, "")}) == {tp: E.FENCED_INSTANCE_ID}
    assert coordinator.leave_group("g", [(follower["member_id"], instance)]) == (E.NONE, [E.FENCED_INSTANCE_ID])
    assert coordinator.leave_group("g", [("", instance)]) == (E.NONE, [E.NONE])
    assert instance not in coordinator.groups["g"].static_members


async def test_commits_from_an_empty_group_and_retention_override() -> None:
    coordinator, _, scheduler = make_coordinator()
    tp = ("t", 3)
    assert coordinator.commit_offsets("solo", -1, "", None, {tp: CommitEntry(42, 7, "meta")}, retention_ms=1000) == {
        tp: E.NONE}
    error, got = coordinator.fetch_offsets("solo", None)
    assert error == E.NONE and got[tp].offset == 42 and got[tp].leader_epoch == 7 and got[tp].metadata == "meta"
    too_big = {tp: CommitEntry(1, -1, "x" * 5000)}
    assert coordinator.commit_offsets("solo", -1, "", None, too_big) == {tp: E.OFFSET_METADATA_TOO_LARGE}
    scheduler.advance(1001)
    assert coordinator.expire_offsets() == 1
    assert "solo" not in coordinator.groups


async def test_offsets_of_empty_groups_expire_after_retention() -> None:
    coordinator, _, scheduler = make_coordinator(offsets_retention_ms=60_000)
    (member,) = await _stable_group(coordinator, scheduler, 1)
    tp = ("t", 0)
    coordinator.commit_offsets("g", 1, member["member_id"], None, {tp: CommitEntry(9, -1, "")})
    coordinator.commit_offsets("g", 1, member["member_id"], None, {("unsubscribed", 0): CommitEntry(1, -1, "")})
    for _ in range(24):
        scheduler.advance(5000)
        assert coordinator.heartbeat("g", 1, member["member_id"], None) == E.NONE
    assert coordinator.expire_offsets() == 1, "only the offset of a topic nobody subscribes to expires"
    assert set(coordinator.fetch_offsets("g", None)[1]) == {tp}
    coordinator.leave_group("g", [(member["member_id"], None)])
    assert coordinator.groups["g"].state == GroupState.EMPTY
    scheduler.advance(59_000)
    assert coordinator.expire_offsets() == 0
    scheduler.advance(2_000)
    assert coordinator.expire_offsets() == 1
    assert "g" not in coordinator.groups


async def test_storage_failure_changes_nothing() -> None:
    coordinator, store, scheduler = make_coordinator()
    (member,) = await _stable_group(coordinator, scheduler, 1)
    tp = ("t", 0)
    store.fail_with = E.NOT_COORDINATOR
    assert coordinator.commit_offsets("g", 1, member["member_id"], None, {tp: CommitEntry(1, -1, "")}) == {
        tp: E.NOT_COORDINATOR}
    assert coordinator.fetch_offsets("g", [tp]) == (E.NONE, {tp: None})
    assert coordinator.delete_groups(["g"]) == {"g": E.NON_EMPTY_GROUP}


async def test_state_is_reloaded_from_the_store() -> None:
    coordinator, store, scheduler = make_coordinator()
    members = await _stable_group(coordinator, scheduler, 3)
    offsets = {("t", p): CommitEntry(100 + p, 2, f"m{p}") for p in range(8)}
    assert set(coordinator.commit_offsets("g", 1, members[1]["member_id"], None, offsets).values()) == {E.NONE}
    coordinator.commit_offsets("g", 1, members[1]["member_id"], None, {("t", 0): CommitEntry(500, 3, "newer")})
    coordinator.commit_offsets("other", -1, "", None, {("u", 0): CommitEntry(1, -1, "")})
    coordinator.delete_offsets("other", [("u", 0)])

    reloaded, _, _ = make_coordinator(store=store, scheduler=scheduler)
    error, got = reloaded.fetch_offsets("g", None)
    assert error == E.NONE and len(got) == 8
    assert (got[("t", 0)].offset, got[("t", 0)].metadata) == (500, "newer")
    assert got[("t", 5)].offset == 105 and got[("t", 5)].leader_epoch == 2
    assert reloaded.fetch_offsets("other", None) == (E.NONE, {})
    group = reloaded.groups["g"]
    assert group.state == GroupState.STABLE and group.generation_id == 1
    assert set(group.members) == {m["member_id"] for m in members}
    for m in members:  # clients that survived a broker restart carry on without a rebalance
        assert reloaded.heartbeat("g", 1, m["member_id"], None) == E.NONE
        synced = await reloaded.sync_group("g", 1, m["member_id"], None, None, None, [])
        assert synced["assignment"] == f"assigned-to-{m['member_id']}".encode()


async def test_delete_groups_and_offsets() -> None:
    coordinator, store, scheduler = make_coordinator()
    (member,) = await _stable_group(coordinator, scheduler, 1, protocols=[("range", subscription("t"))])
    coordinator.commit_offsets("g", 1, member["member_id"], None,
                               {("t", 0): CommitEntry(1, -1, ""), ("old", 0): CommitEntry(2, -1, "")})
    assert coordinator.delete_offsets("g", [("t", 0), ("old", 0)]) == (
        E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): E.NONE})
    assert set(coordinator.fetch_offsets("g", None)[1]) == {("t", 0)}
    assert coordinator.delete_offsets("nope", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
    assert coordinator.delete_groups(["g", "nope", ""]) == {
        "g": E.NON_EMPTY_GROUP, "nope": E.GROUP_ID_NOT_FOUND, "": E.GROUP_ID_NOT_FOUND}
    coordinator.leave_group("g", [(member["member_id"], None)])
    assert coordinator.delete_groups(["g"]) == {"g": E.NONE}
    assert coordinator.describe_group("g") == (E.NONE, None)
    reloaded, _, _ = make_coordinator(store=store, scheduler=scheduler)
    assert "g" not in reloaded.groups


async def test_list_and_describe() -> None:
    coordinator, _, scheduler = make_coordinator()
    leader, follower = await _stable_group(coordinator, scheduler, 2)
    coordinator.commit_offsets("simple", -1, "", None, {("t", 0): CommitEntry(1, -1, "")})
    listed = {g["group_id"]: g for g in coordinator.list_groups()}
    assert listed["g"] == {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable",
                           "group_type": "classic"}
    assert listed["simple"]["group_state"] == "Empty" and listed["simple"]["protocol_type"] == ""
    assert [g["group_id"] for g in coordinator.list_groups(states=["stable"])] == ["g"]
    assert coordinator.list_groups(types=["consumer"]) == []
    error, described = coordinator.describe_group("g")
    assert error == E.NONE and described is not None
    assert (described["group_state"], described["protocol_type"], described["protocol_data"]) == (
        "Stable", "consumer", "range")
    by_id = {m["member_id"]: m for m in described["members"]}
    assert by_id[follower["member_id"]]["member_assignment"] == f"assigned-to-{follower['member_id']}".encode()
    assert by_id[leader["member_id"]]["member_metadata"] == subscription("t")
    assert by_id[leader["member_id"]]["client_host"] == "/127.0.0.1"


async def test_offline_partition_unloads_its_groups() -> None:
    coordinator, store, scheduler = make_coordinator()
    (member,) = await _stable_group(coordinator, scheduler, 1)
    partition = coordinator.partition_for("g")
    store.offline.add(partition)
    coordinator.on_log_dir_failure("/dir", OSError("gone"))
    scheduler.advance(0)
    assert "g" not in coordinator.groups
    assert coordinator.heartbeat("g", 1, member["member_id"], None) == E.COORDINATOR_NOT_AVAILABLE
    other = next(g for g in (f"x{i}" for i in range(100)) if coordinator.partition_for(g) != partition)
    assert coordinator.commit_offsets(other, -1, "", None, {("t", 0): CommitEntry(1, -1, "")}) == {("t", 0): E.NONE}


async def test_unknown_topic_deletion_forgets_offsets() -> None:
    coordinator, _, _ = make_coordinator()
    coordinator.commit_offsets("g", -1, "", None, {("gone", 0): CommitEntry(1, -1, ""), ("kept", 0): CommitEntry(2, -1, "")})
    coordinator.on_topic_deleted("gone")
    assert set(coordinator.fetch_offsets("g", None)[1]) == {("kept", 0)}


def test_store_contract_is_met_by_the_memory_store() -> None:
    store = MemoryStore()
    assert store.append(0, [(b"k", b"v"), (b"k", None)]) == E.NONE
    assert [(r.key, r.value) for r in store.read(0)] == [(b"k", b"v"), (b"k", None)]
    assert ManualScheduler().now_ms() > 0


async def test_log_dir_failures_reported_from_another_thread_reach_the_loop() -> None:
    scheduler = LoopScheduler()
    store = MemoryStore()
    coordinator = GroupCoordinator(CoordinatorConfig(), store, scheduler)  # type: ignore[arg-type]
    coordinator.commit_offsets("g", -1, "", None, {("t", 0): CommitEntry(1, -1, "")})
    store.offline.add(coordinator.partition_for("g"))
    reporter = threading.Thread(target=coordinator.on_log_dir_failure, args=("/dir", OSError("gone")))
    reporter.start()
    reporter.join()
    unloaded = asyncio.Event()
    scheduler.call_soon_threadsafe(unloaded.set)  # queued after the coordinator's own work
    await asyncio.wait_for(unloaded.wait(), 5)
    assert "g" not in coordinator.groups


async def test_a_transactional_commit_with_group_metadata_is_checked_like_a_members_commit() -> None:
    # KIP-447: a producer that sends the consumer's group metadata is fenced by a rebalance.
    coordinator, store, scheduler = make_coordinator()
    (leader,) = await _stable_group(coordinator, scheduler, 1)
    member, generation = leader["member_id"], leader["generation_id"]
    txn = TxnProducer(4000, 0)
    entry = {("t", 0): CommitEntry(7, -1, "")}
    assert coordinator.commit_offsets("g", generation + 1, member, None, entry, txn=txn) == {
        ("t", 0): E.ILLEGAL_GENERATION}
    assert coordinator.commit_offsets("g", generation, "someone-else", None, entry, txn=txn) == {
        ("t", 0): E.UNKNOWN_MEMBER_ID}
    assert coordinator.commit_offsets("g", generation, member, None, entry, txn=txn) == {("t", 0): E.NONE}
    assert coordinator.commit_offsets("g", -1, "", None, {("t", 1): CommitEntry(3, -1, "")}, txn=txn) == {
        ("t", 1): E.NONE}, "a producer without the group's metadata commits to a group with members"
    assert coordinator.fetch_offsets("g", [("t", 0)]) == (E.NONE, {("t", 0): None})
    partition = coordinator.partition_for("g")
    store.write_marker(partition, txn.producer_id, committed=True)
    coordinator.complete_txn(partition, txn.producer_id, committed=True)
    assert {tp: om.offset for tp, om in coordinator.fetch_offsets("g", None)[1].items()} == {("t", 0): 7, ("t", 1): 3}
    reloaded, _, _ = make_coordinator(store)
    assert {tp: om.offset for tp, om in reloaded.fetch_offsets("g", None)[1].items()} == {("t", 0): 7, ("t", 1): 3}
