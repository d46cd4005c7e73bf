"""Consumer groups: the group coordinator and its storage in __consumer_offsets.

`coordinator.GroupCoordinator` is the face the broker sees, over the shared coordinator
runtime (`minikafka.coordinator.runtime`: load, unload, write-then-apply): `membership` runs
the classic group protocol (members, rebalances, timers) and `offsets` owns committed offsets;
`group` holds the per-group state they mutate; `minikafka.coordinator.topic.CoordinatorTopic`
writes and reads the internal topic; `schemas` declares the record formats (Kafka's, versions
as data). KIP-848's consumer protocol: `consumer_group` (the group state machine, reconciliation
and `ConsumerGroups`, which the GroupCoordinator holds and consults for offsets), `assignors`
(the server-side uniform and range assignors) and `consumer_records` (Kafka 4's record types).
"""
