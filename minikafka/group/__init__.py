"""Consumer groups: the group coordinator and its storage in __consumer_offsets.

`coordinator.GroupCoordinator` runs the classic group protocol and owns committed offsets;
`group` holds the per-group state it mutates; `minikafka.coordinator.topic.CoordinatorTopic`
writes and reads the internal topic; `schemas` declares the record formats (Kafka's, versions
as data).
"""
