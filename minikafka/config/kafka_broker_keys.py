"""Apache Kafka's broker config keys, as Kafka 3.9 sorts them for AlterConfigs on a broker.

Facts read off a Kafka 3.9 broker (its DescribeConfigs and its answers to AlterConfigs): which
keys it updates at run time, which it refuses as static, which only a broker id (not the cluster
default) may carry, and which only a listener prefix may carry. minikafka answers AlterConfigs
as Kafka does with them; broker.py says which of the dynamic ones minikafka acts on. No imports:
broker.py builds on this module.
"""

from __future__ import annotations

# Kafka's dynamic broker keys that minikafka defines (config.DEFINITIONS), whether or not it
# applies a change of them at run time.
KAFKA_DYNAMIC_DEFINED = frozenset({
    "advertised.listeners", "background.threads", "listener.security.protocol.map", "listeners",
    "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size", "log.cleaner.delete.retention.ms",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.threads", "log.cleanup.policy", "log.index.interval.bytes", "log.message.timestamp.type",
    "log.retention.bytes", "log.retention.ms", "log.roll.ms", "log.segment.bytes", "log.segment.delete.delay.ms",
    "message.max.bytes", "min.insync.replicas", "num.replica.fetchers", "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol", "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.key.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol",
    "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
    "transaction.partition.verification.enable", "unclean.leader.election.enable",
    # Kafka's replication quotas (DynamicConfig.Broker rather than KafkaConfig).
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
})

# Kafka's dynamic broker keys that minikafka has no behaviour for: (type, Kafka's default). They
# are accepted, stored and described as Kafka does, so that tools which set them work; the value
# is checked against the type only.
KAFKA_DYNAMIC_UNDEFINED: dict[str, tuple[str, str | None]] = {
    "compression.gzip.level": ("INT", "-1"),
    "compression.lz4.level": ("INT", "9"),
    "compression.type": ("STRING", "producer"),
    "compression.zstd.level": ("INT", "3"),
    "log.flush.interval.messages": ("LONG", "9223372036854775807"),
    "log.flush.interval.ms": ("LONG", None),
    "log.index.size.max.bytes": ("INT", "10485760"),
    "log.local.retention.bytes": ("LONG", "-2"),
    "log.local.retention.ms": ("LONG", "-2"),
    "log.message.downconversion.enable": ("BOOLEAN", "true"),
    "log.message.timestamp.after.max.ms": ("LONG", "9223372036854775807"),
    "log.message.timestamp.before.max.ms": ("LONG", "9223372036854775807"),
    "log.message.timestamp.difference.max.ms": ("LONG", "9223372036854775807"),
    "log.preallocate": ("BOOLEAN", "false"),
    "log.roll.jitter.ms": ("LONG", None),
    "max.connection.creation.rate": ("INT", "2147483647"),
    "max.connections": ("INT", "2147483647"),
    "max.connections.per.ip": ("INT", "2147483647"),
    "max.connections.per.ip.overrides": ("STRING", ""),
    "metric.reporters": ("LIST", ""),
    "num.io.threads": ("INT", "8"),
    "num.network.threads": ("INT", "3"),
    "num.recovery.threads.per.data.dir": ("INT", "1"),
    "principal.builder.class": ("CLASS", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    "producer.id.expiration.ms": ("INT", "86400000"),
    "remote.fetch.max.wait.ms": ("INT", "500"),
    "remote.log.index.file.cache.total.size.bytes": ("LONG", "1073741824"),
    "remote.log.manager.copy.max.bytes.per.second": ("LONG", "9223372036854775807"),
    "remote.log.manager.fetch.max.bytes.per.second": ("LONG", "9223372036854775807"),
    "sasl.jaas.config": ("PASSWORD", None),
    "sasl.kerberos.kinit.cmd": ("STRING", "/usr/bin/kinit"),
    "sasl.kerberos.min.time.before.relogin": ("LONG", "60000"),
    "sasl.kerberos.principal.to.local.rules": ("LIST", "DEFAULT"),
    "sasl.kerberos.service.name": ("STRING", None),
    "sasl.kerberos.ticket.renew.jitter": ("DOUBLE", "0.05"),
    "sasl.kerberos.ticket.renew.window.factor": ("DOUBLE", "0.8"),
    "sasl.login.refresh.buffer.seconds": ("SHORT", "300"),
    "sasl.login.refresh.min.period.seconds": ("SHORT", "60"),
    "sasl.login.refresh.window.factor": ("DOUBLE", "0.8"),
    "sasl.login.refresh.window.jitter": ("DOUBLE", "0.05"),
    "ssl.engine.factory.class": ("CLASS", None),
    "ssl.keymanager.algorithm": ("STRING", "SunX509"),
    "ssl.provider": ("STRING", None),
    "ssl.secure.random.implementation": ("STRING", None),
    "ssl.trustmanager.algorithm": ("STRING", "PKIX"),
}

# Kafka's broker keys that only a restart changes: AlterConfigs refuses them ("Cannot update these
# configs dynamically"). minikafka's own static keys (config.DEFINITIONS) are refused alike.
KAFKA_STATIC_UNDEFINED = frozenset({
    "alter.config.policy.class.name", "alter.config.policy.kraft.compatibility.enable",
    "alter.log.dirs.replication.quota.window.num", "alter.log.dirs.replication.quota.window.size.seconds",
    "auto.include.jmx.reporter", "broker.heartbeat.interval.ms", "broker.id.generation.enable",
    "broker.session.timeout.ms", "client.quota.callback.class", "connections.max.idle.ms",
    "controller.listener.names", "controller.quorum.append.linger.ms",
    "controller.quorum.bootstrap.servers", "controller.quorum.election.backoff.max.ms",
    "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms", "controller.quorum.voters",
    "controller.quota.window.num", "controller.quota.window.size.seconds", "controller.socket.timeout.ms",
    "create.topic.policy.class.name", "delegation.token.expiry.check.interval.ms",
    "delegation.token.expiry.time.ms", "delegation.token.master.key", "delegation.token.max.lifetime.ms",
    "delegation.token.secret.key", "delete.records.purgatory.purge.interval.requests", "delete.topic.enable",
    "early.start.listeners", "eligible.leader.replicas.enable", "fetch.purgatory.purge.interval.requests",
    "group.consumer.max.heartbeat.interval.ms", "group.consumer.max.session.timeout.ms",
    "group.consumer.min.heartbeat.interval.ms", "group.consumer.min.session.timeout.ms",
    "group.coordinator.append.linger.ms", "group.coordinator.threads",
    "group.share.delivery.count.limit", "group.share.heartbeat.interval.ms", "group.share.max.groups",
    "group.share.max.heartbeat.interval.ms", "group.share.max.record.lock.duration.ms",
    "group.share.max.session.timeout.ms", "group.share.max.size", "group.share.min.heartbeat.interval.ms",
    "group.share.min.record.lock.duration.ms", "group.share.min.session.timeout.ms",
    "group.share.partition.max.record.locks", "group.share.record.lock.duration.ms",
    "group.share.session.timeout.ms", "initial.broker.registration.timeout.ms",
    "kafka.metrics.polling.interval.secs", "kafka.metrics.reporters", "leader.imbalance.per.broker.percentage",
    "log.dir", "log.flush.scheduler.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "log.message.format.version", "log.roll.jitter.hours", "max.incremental.fetch.session.cache.slots",
    "max.request.partition.size.limit", "metadata.log.dir", "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.max.snapshot.interval.ms", "metadata.log.segment.bytes", "metadata.log.segment.ms",
    "metadata.max.idle.interval.ms", "metadata.max.retention.bytes", "metadata.max.retention.ms",
    "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms", "node.id",
    "offsets.commit.required.acks", "offsets.commit.timeout.ms", "offsets.load.buffer.size",
    "offsets.topic.compression.codec", "password.encoder.cipher.algorithm", "password.encoder.iterations",
    "password.encoder.key.length", "password.encoder.keyfactory.algorithm", "password.encoder.old.secret",
    "password.encoder.secret", "process.roles", "producer.purgatory.purge.interval.requests",
    "queued.max.request.bytes",
    "remote.log.manager.copier.thread.pool.size", "remote.log.manager.copy.quota.window.num",
    "remote.log.manager.copy.quota.window.size.seconds", "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.fetch.quota.window.num", "remote.log.manager.fetch.quota.window.size.seconds",
    "remote.log.manager.task.interval.ms", "remote.log.manager.thread.pool.size",
    "remote.log.metadata.custom.metadata.max.bytes", "remote.log.metadata.manager.class.name",
    "remote.log.metadata.manager.class.path", "remote.log.metadata.manager.impl.prefix",
    "remote.log.metadata.manager.listener.name", "remote.log.reader.max.pending.tasks",
    "remote.log.reader.threads", "remote.log.storage.manager.class.name",
    "remote.log.storage.manager.class.path", "remote.log.storage.manager.impl.prefix",
    "remote.log.storage.system.enable", "replica.high.watermark.checkpoint.interval.ms",
    "replica.socket.receive.buffer.bytes", "replica.socket.timeout.ms",
    "replication.quota.window.num", "replication.quota.window.size.seconds", "request.timeout.ms",
    "reserved.broker.max.id", "sasl.client.callback.handler.class", "sasl.login.callback.handler.class",
    "sasl.login.class", "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.max.ms", "sasl.login.retry.backoff.ms", "sasl.mechanism.controller.protocol",
    "sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.token.endpoint.url",
    "sasl.server.callback.handler.class", "security.providers", "socket.connection.setup.timeout.max.ms",
    "socket.connection.setup.timeout.ms", "socket.listen.backlog.size", "socket.receive.buffer.bytes",
    "socket.send.buffer.bytes", "ssl.allow.dn.changes", "ssl.allow.san.changes", "telemetry.max.bytes",
    "transaction.remove.expired.transaction.cleanup.interval.ms", "transaction.state.log.load.buffer.size",
    "zookeeper.clientCnxnSocket", "zookeeper.max.in.flight.requests", "zookeeper.metadata.migration.enable",
    "zookeeper.set.acl", "zookeeper.ssl.cipher.suites", "zookeeper.ssl.client.enable",
    "zookeeper.ssl.crl.enable", "zookeeper.ssl.enabled.protocols",
    "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper.ssl.keystore.location",
    "zookeeper.ssl.keystore.password", "zookeeper.ssl.keystore.type", "zookeeper.ssl.ocsp.enable",
    "zookeeper.ssl.protocol", "zookeeper.ssl.truststore.location", "zookeeper.ssl.truststore.password",
    "zookeeper.ssl.truststore.type"
})

# Key stores and trust stores: only per listener (listener.name.<listener>.<key>), as Kafka's
# SslConfigs.RECONFIGURABLE_CONFIGS.
PER_LISTENER_ONLY = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates",
})

# Listener and security keys: a broker id must be named; the cluster default may not carry them.
PER_BROKER_ONLY = PER_LISTENER_ONLY | frozenset({
    "advertised.listeners", "listener.security.protocol.map", "listeners", "principal.builder.class",
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.mechanism.inter.broker.protocol", "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class", "ssl.keymanager.algorithm", "ssl.protocol",
    "ssl.provider", "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
})

# The listener-prefixed keys the cluster default may carry (every other one is per broker).
CLUSTER_LEVEL_LISTENER_KEYS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
