import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One group member in a JVM of its own, so that a test can kill it with SIGKILL (the Java twin of
 * tests/system/consumer_protocol_member.py, writing the same event log):
 * --bootstrap --group --topic --name --events FILE [--protocol consumer|classic] [--hold yes].
 * With --hold it joins only when a line (or the end) comes on stdin: a JVM takes seconds to start
 * on a loaded machine, so a test starts its later members early and lets them join when it wants.
 *
 * One JSON line per event, flushed at once (what a killed JVM wrote stays): {"t": wall time in
 * seconds, "e": "assign"|"revoke"|"lost", "p": [partitions]} from the rebalance callbacks,
 * {"e": "read", "r": [[partition, offset, key], ...]} per poll, {"e": "commit", "c": {partition:
 * next offset}} per synchronous commit that succeeded. SIGTERM closes the consumer (it leaves the
 * group). Classic members use the cooperative-sticky assignor and a 6 s session, as the Python one.
 */
public final class EventLogMember implements ConsumerRebalanceListener {
    private final Writer events;
    private final KafkaConsumer<String, String> consumer;
    private volatile boolean stopping;

    private EventLogMember(Args args) throws IOException {
        events = new OutputStreamWriter(new FileOutputStream(args.get("events"), true), StandardCharsets.UTF_8);
        String protocol = args.get("protocol", "consumer");
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, args.get("group"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, args.get("name"));
        config.put("group.protocol", protocol);
        if (protocol.equals("classic")) {
            config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                       "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
            config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumer = new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer());
    }

    private synchronized void write(Object... keysAndValues) {
        Object[] line = new Object[keysAndValues.length + 2];
        line[0] = "t";
        line[1] = System.currentTimeMillis() / 1000.0;
        System.arraycopy(keysAndValues, 0, line, 2, keysAndValues.length);
        try {
            events.write(Json.object(line) + "\n");
            events.flush();
        } catch (IOException error) {
            throw new IllegalStateException("cannot write the event log", error);
        }
    }

    /** Commits past the records of one poll (as commitSync() would, but naming what it committed). */
    private void commit(ConsumerRecords<String, String> records) {
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        for (ConsumerRecord<String, String> record : records) {
            next.put(new TopicPartition(record.topic(), record.partition()), new OffsetAndMetadata(record.offset() + 1));
        }
        try {
            consumer.commitSync(next);
        } catch (WakeupException stop) {
            throw stop;
        } catch (KafkaException error) {  // the next batch's commit covers these, as applications do
            write("e", "commit_failed", "why", error.toString());
            return;
        }
        Map<String, Long> committed = new TreeMap<>();
        next.forEach((partition, offset) -> committed.put(String.valueOf(partition.partition()), offset.offset()));
        write("e", "commit", "c", committed);
    }

    private void run(String topic) {
        consumer.subscribe(List.of(topic), this);
        write("e", "started");
        try {
            while (!stopping) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                List<List<Object>> read = new ArrayList<>();
                for (ConsumerRecord<String, String> record : records) {
                    read.add(List.of(record.partition(), record.offset(), record.key()));
                }
                write("e", "read", "r", read);
                commit(records);
            }
        } catch (WakeupException stop) {
            // SIGTERM: close below, as the Python member does
        } finally {
            consumer.close();
            write("e", "closed");
        }
    }

    private static List<Integer> numbers(Collection<TopicPartition> partitions) {
        List<Integer> numbers = new ArrayList<>();
        for (TopicPartition partition : partitions) {
            numbers.add(partition.partition());
        }
        return numbers;
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        write("e", "revoke", "p", numbers(partitions));
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        write("e", "assign", "p", numbers(partitions));
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
        write("e", "lost", "p", numbers(partitions));
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        EventLogMember member = new EventLogMember(args);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            member.stopping = true;
            member.consumer.wakeup();
            try {
                main.join(30_000);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        if (args.get("hold", "no").equals("yes")) {
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        }
        if (!member.stopping) {
            member.run(args.get("topic"));
        }
    }
}
