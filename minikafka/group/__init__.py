"""Consumer groups: the group coordinator and its storage in __consumer_offsets.

`coordinator.GroupCoordinator` runs the classic group protocol and owns committed offsets;
`group` holds the per-group state it mutates; `minikafka.coordinator.topic.CoordinatorTopic`
writes and reads the internal topic; `schemas` declares the record formats (Kafka's, versions
as data). KIP-848's consumer protocol: `consumer_group` (the group state machine, reconciliation
and `ConsumerGroups`, which the GroupCoordinator holds and consults for offsets), `assignors`
(the server-side uniform and range assignors) and `consumer_records` (Kafka 4's record types).
"""
