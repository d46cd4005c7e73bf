"""Storage layer: Segment -> Log -> LogManager, in Kafka's on-disk format. Its modules are
imported one by one (nothing is gathered here, so that loading one does not load the rest)."""
