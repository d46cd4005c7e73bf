"""What the controller concludes from the log dirs brokers register and the dirs recorded for
their replicas (KIP-112's offline replicas, KIP-858's lost ones), without ZooKeeper."""

from __future__ import annotations

import uuid

from minikafka.controller.isr_proposals import IsrProposal, judge
from minikafka.controller.state import ControllerState, PartitionRecord, lost_replica
from minikafka.zk.kafka_zk import BrokerRegistration, LeaderIsr, LogDirState, TopicAssignment
from protocol.errors import ErrorCode

OLD_DIR, NEW_DIR, OTHER_DIR = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def _registration(*dirs: LogDirState) -> BrokerRegistration:
    return BrokerRegistration(1, {"INTERNAL": ("127.0.0.1", 9093, "PLAINTEXT")}, epoch=7, log_dirs=dirs)


def _state(registration: BrokerRegistration, recorded: dict[int, uuid.UUID | None]) -> ControllerState:
    state = ControllerState(brokers={1: registration})
    state.topics["t"] = TopicAssignment(uuid.uuid4(), {p: (1, 2) for p in recorded})
    for partition, directory in recorded.items():
        directories = {1: directory} if directory is not None else {}
        state.partitions[("t", partition)] = PartitionRecord(LeaderIsr(1, 0, (1, 2), 1, directories), 0)
    return state


def test_a_replica_recorded_in_a_dir_its_broker_no_longer_has_is_lost() -> None:
    replaced = _registration(LogDirState("/d1", NEW_DIR, True), LogDirState("/d2", OTHER_DIR, True))
    assert lost_replica(OLD_DIR, replaced)
    assert not lost_replica(OTHER_DIR, replaced), "a dir it still has: a move, not a loss"
    assert not lost_replica(None, replaced), "never reported: no evidence either way"
    assert not lost_replica(OLD_DIR, _registration()), "a registration without dirs says nothing"
    state = _state(replaced, {0: OLD_DIR, 1: OTHER_DIR, 2: None})
    assert state.lost_by_dirs(1) == {("t", 0)}
    assert state.offline_by_dirs(1) == set()


def test_with_a_dir_offline_its_replicas_are_offline_not_lost() -> None:
    # The failed dir's id may be unreadable (None): what is not online is on the failed disk.
    failing = _registration(LogDirState("/d1", None, False), LogDirState("/d2", OTHER_DIR, True))
    state = _state(failing, {0: OLD_DIR, 1: OTHER_DIR})
    assert state.offline_by_dirs(1) == {("t", 0)}
    assert state.lost_by_dirs(1) == set()


def test_a_leaders_isr_proposal_made_before_a_dir_assignment_is_still_current() -> None:
    # A leader told of the partition at version 7 proposes an ISR change at 7. A follower's
    # AssignReplicasToDirs wrote the state meanwhile (version 8), and no broker was told of it: the
    # proposal is still decided on the current leader and ISR. A leader or ISR change is not.
    told = PartitionRecord(LeaderIsr(1, 4, (1,), 1), 7)
    placed = told.with_dirs(LeaderIsr(1, 4, (1,), 1, {2: NEW_DIR}), 8)
    again = placed.with_dirs(LeaderIsr(1, 4, (1,), 1, {2: NEW_DIR, 1: OLD_DIR}), 9)
    assert (placed.zk_version, placed.proposal_version, again.proposal_version) == (8, 7, 7)
    proposal = IsrProposal(4, (1, 2), {}, 0, 7)
    live = {1: 100, 2: 200}
    assert judge(1, proposal, again.state, again.proposal_version, (1, 2), live) == \
        LeaderIsr(1, 4, (1, 2), 1, {2: NEW_DIR, 1: OLD_DIR})
    decided = PartitionRecord(LeaderIsr(1, 4, (1,), 1), 10)  # an ISR change written since
    assert decided.proposal_version == 10
    assert judge(1, proposal, decided.state, decided.proposal_version, (1, 2), live) == ErrorCode.INVALID_UPDATE_VERSION
