import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeLogDirsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The AdminClient calls Kafka's tools make (kafka-topics, kafka-configs, kafka-consumer-groups,
 * kafka-delete-records, kafka-leader-election, kafka-log-dirs, kafka-reassign-partitions, and with
 * --security, kafka-acls and kafka-configs' SCRAM users), on topic --topic and group --group.
 * Prints one JSON line per call: {"call": NAME, ...what it answered} or {"call": NAME, "error":
 * exception class}; then {"done":true}.
 */
public final class AdminCalls {
    private interface Call {
        Object[] run() throws Exception;
    }

    private static void call(String name, Call call) {
        try {
            Object[] answer = call.run();
            Object[] line = new Object[answer.length + 2];
            line[0] = "call";
            line[1] = name;
            System.arraycopy(answer, 0, line, 2, answer.length);
            Json.print(line);
        } catch (ExecutionException failed) {
            Json.print("call", name, "error", failed.getCause().getClass().getSimpleName());
        } catch (Exception failed) {
            Json.print("call", name, "error", failed.getClass().getSimpleName(), "message", failed.toString());
        }
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        Properties config = Json.load(args.get("config", "-"));
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        String topic = args.get("topic");
        String group = args.get("group");
        int brokerId = args.integer("broker-id");
        try (Admin admin = Admin.create(config)) {
            run(admin, config, topic, group, brokerId);
            if (args.get("security", "false").equals("true")) {
                security(admin, topic);
            }
        }
        Json.print("done", true);
    }

    private static void run(Admin admin, Properties config, String topic, String group, int brokerId) {
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        List<TopicPartition> partitions = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        call("createTopics", () -> {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1)
                .configs(Map.of("retention.ms", "3600000")))).all().get();
            return new Object[] {};
        });
        call("createTopics again", () -> {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            return new Object[] {};
        });
        call("listTopics", () -> new Object[] {"names", admin.listTopics().names().get().contains(topic)});
        call("describeTopics", () -> describe(admin, topic));
        call("createPartitions", () -> {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            return describe(admin, topic);
        });
        call("describeConfigs", () -> topicConfig(admin, topicResource));
        call("incrementalAlterConfigs", () -> {
            admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                new AlterConfigOp(new ConfigEntry("segment.bytes", "1048576"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
            return topicConfig(admin, topicResource);
        });
        call("describeBrokerConfig", () -> {
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(brokerId));
            Config found = admin.describeConfigs(List.of(broker)).all().get().get(broker);
            return new Object[] {"num.partitions", found.get("num.partitions").value()};
        });
        call("describeCluster", () -> new Object[] {
            "nodes", admin.describeCluster().nodes().get().stream().map(n -> n.id()).toList(),
            "controller", admin.describeCluster().controller().get().id(),
            "clusterId", admin.describeCluster().clusterId().get() != null});
        call("describeLogDirs", () -> {
            DescribeLogDirsResult result = admin.describeLogDirs(List.of(brokerId));
            Map<String, List<Integer>> replicas = new TreeMap<>();
            for (Map.Entry<String, LogDirDescription> dir : result.allDescriptions().get().get(brokerId).entrySet()) {
                for (TopicPartition replica : dir.getValue().replicaInfos().keySet()) {
                    if (replica.topic().equals(topic)) {
                        replicas.computeIfAbsent(dir.getKey(), k -> new ArrayList<>()).add(replica.partition());
                    }
                }
            }
            return new Object[] {"dirs", replicas};
        });
        call("produce", () -> {
            Properties producerConfig = new Properties();
            producerConfig.putAll(config);
            try (KafkaProducer<String, String> producer =
                     new KafkaProducer<>(producerConfig, new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get();
                }
            }
            return new Object[] {};
        });
        call("listOffsets", () -> new Object[] {
            "earliest", admin.listOffsets(Map.of(partitions.get(0), OffsetSpec.earliest())).all().get()
                .get(partitions.get(0)).offset(),
            "latest", admin.listOffsets(Map.of(partitions.get(0), OffsetSpec.latest())).all().get()
                .get(partitions.get(0)).offset()});
        call("deleteRecords", () -> {
            var deleted = admin.deleteRecords(Map.of(partitions.get(0), RecordsToDelete.beforeOffset(4)));
            return new Object[] {
                "low_watermark", deleted.lowWatermarks().get(partitions.get(0)).get().lowWatermark(),
                "earliest", admin.listOffsets(Map.of(partitions.get(0), OffsetSpec.earliest())).all().get()
                    .get(partitions.get(0)).offset()};
        });
        call("commitOffsets", () -> {
            Properties consumerConfig = new Properties();
            consumerConfig.putAll(config);
            consumerConfig.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            consumerConfig.put("group.protocol", "classic");
            try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(consumerConfig, new StringDeserializer(), new StringDeserializer())) {
                consumer.commitSync(Map.of(partitions.get(0), new OffsetAndMetadata(7),
                                           partitions.get(1), new OffsetAndMetadata(0)));
            }
            return new Object[] {};
        });
        call("listConsumerGroups", () -> {
            List<String> ids = new ArrayList<>();
            for (ConsumerGroupListing listing : admin.listConsumerGroups().all().get()) {
                ids.add(listing.groupId());
            }
            return new Object[] {"has", ids.contains(group)};
        });
        call("describeConsumerGroups", () -> {
            ConsumerGroupDescription found = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            return new Object[] {"state", found.groupState().toString(), "members", found.members().size()};
        });
        call("listConsumerGroupOffsets", () -> new Object[] {"offsets", groupOffsets(admin, group)});
        call("alterConsumerGroupOffsets", () -> {
            admin.alterConsumerGroupOffsets(group, Map.of(partitions.get(0), new OffsetAndMetadata(9))).all().get();
            return new Object[] {"offsets", groupOffsets(admin, group)};
        });
        call("deleteConsumerGroupOffsets", () -> {
            admin.deleteConsumerGroupOffsets(group, java.util.Set.of(partitions.get(1))).all().get();
            return new Object[] {"offsets", groupOffsets(admin, group)};
        });
        call("electLeaders", () -> {
            var result = admin.electLeaders(ElectionType.PREFERRED, java.util.Set.of(partitions.get(0)))
                .partitions().get();
            return new Object[] {"error", result.get(partitions.get(0)).map(e -> e.getClass().getSimpleName())
                .orElse(null)};
        });
        call("listPartitionReassignments", () -> new Object[] {
            "count", admin.listPartitionReassignments().reassignments().get().size()});
        call("deleteConsumerGroups", () -> {
            admin.deleteConsumerGroups(List.of(group)).all().get();
            return new Object[] {"has", admin.listConsumerGroups().all().get().stream()
                .anyMatch(g -> g.groupId().equals(group))};
        });
        call("deleteTopics", () -> {
            admin.deleteTopics(List.of(topic)).all().get();
            return new Object[] {"names", admin.listTopics().names().get().contains(topic)};
        });
    }

    private static void security(Admin admin, String topic) {
        AclBinding binding = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
            new AccessControlEntry("User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW));
        AclBindingFilter bobs = new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.ANY, null, PatternType.ANY),
            new AccessControlEntryFilter("User:bob", null, AclOperation.ANY, AclPermissionType.ANY));
        call("createAcls", () -> {
            admin.createAcls(List.of(binding)).all().get();
            return new Object[] {"described", admin.describeAcls(bobs).values().get().stream()
                .map(Object::toString).toList()};
        });
        call("deleteAcls", () -> new Object[] {
            "deleted", admin.deleteAcls(List.of(bobs)).all().get().size(),
            "described", admin.describeAcls(bobs).values().get().size()});
        call("alterUserScramCredentials", () -> {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                "bob", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "bob-secret"))).all().get();
            var described = admin.describeUserScramCredentials(List.of("bob")).all().get().get("bob");
            List<String> infos = new ArrayList<>();
            for (ScramCredentialInfo info : described.credentialInfos()) {
                infos.add(info.mechanism() + "/" + info.iterations());
            }
            return new Object[] {"bob", infos};
        });
    }

    private static Object[] describe(Admin admin, String topic) throws Exception {
        TopicDescription found = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<Object> partitions = new ArrayList<>();
        for (TopicPartitionInfo info : found.partitions()) {
            partitions.add(List.of(info.partition(), info.leader().id(),
                                   info.replicas().stream().map(n -> n.id()).toList()));
        }
        return new Object[] {"partitions", partitions, "topicId", found.topicId() != null};
    }

    private static Object[] topicConfig(Admin admin, ConfigResource resource) throws Exception {
        Config found = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        return new Object[] {
            "retention.ms", List.of(found.get("retention.ms").value(), found.get("retention.ms").source().toString()),
            "segment.bytes", List.of(found.get("segment.bytes").value(),
                                     found.get("segment.bytes").source().toString())};
    }

    private static Map<Integer, Long> groupOffsets(Admin admin, String group) throws Exception {
        Map<Integer, Long> offsets = new TreeMap<>();
        for (var entry : admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().entrySet()) {
            offsets.put(entry.getKey().partition(), entry.getValue() == null ? null : entry.getValue().offset());
        }
        return offsets;
    }
}
