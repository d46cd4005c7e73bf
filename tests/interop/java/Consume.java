import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.Exit;

/**
 * Reads --topic. With --group it subscribes as a member of that group (classic protocol; the
 * assignor, isolation level and the like come from --config), reads until --expected records
 * have come, and commits what it read. Without a group it assigns itself every partition from the
 * beginning and reads to the end offsets it finds first (the last stable offset under
 * read_committed), so that it shows everything there is and nothing more. Gives up after
 * --timeout-ms. Prints one JSON line per record ({"key","value","partition","offset"}), then
 * {"done":true,"count":N}. Exits 1 when it gave up.
 */
public final class Consume {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        Properties config = Json.load(args.get("config", "-"));
        String group = args.get("group", "");
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (!group.isEmpty()) {
            config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            config.putIfAbsent("group.protocol", "classic");
        }
        String topic = args.get("topic");
        long deadline = System.currentTimeMillis() + args.integer("timeout-ms", 60_000);
        int count = 0;
        boolean complete;
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
            Map<TopicPartition, Long> ends = null;
            int expected = Integer.MAX_VALUE;
            if (group.isEmpty()) {
                List<TopicPartition> partitions = new ArrayList<>();
                for (PartitionInfo info : consumer.partitionsFor(topic)) {
                    partitions.add(new TopicPartition(topic, info.partition()));
                }
                consumer.assign(partitions);
                consumer.seekToBeginning(partitions);
                ends = consumer.endOffsets(partitions);
            } else {
                expected = args.integer("expected");
                consumer.subscribe(List.of(topic));
            }
            complete = done(consumer, ends, count, expected);
            while (!complete && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    count++;
                    Json.print("key", record.key(), "value", record.value(), "partition", record.partition(),
                               "offset", record.offset());
                }
                complete = done(consumer, ends, count, expected);
            }
            if (!group.isEmpty()) {
                consumer.commitSync();
            }
        }
        Json.print("done", complete, "count", count);
        Exit.exit(complete ? 0 : 1);
    }

    private static boolean done(KafkaConsumer<?, ?> consumer, Map<TopicPartition, Long> ends, int count,
                                int expected) {
        if (ends == null) {
            return count >= expected;
        }
        for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
            if (consumer.position(end.getKey()) < end.getValue()) {
                return false;
            }
        }
        return true;
    }
}
