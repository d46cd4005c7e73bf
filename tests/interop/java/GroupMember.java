import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One member of a consumer group (classic protocol, or KIP-848's consumer protocol) on a thread of its own, for the group
 * scenarios. It commits after every batch it read and in onPartitionsRevoked, so that a
 * partition that moves is read on from where it was left, and prints every record it reads
 * ({"member","key","partition","offset"}) and every rebalance callback
 * ({"member","event":"assigned|revoked|lost","partitions":[...],"generation"}).
 * Only its own thread touches the consumer; the scenario reads the volatile fields.
 */
final class GroupMember implements Runnable, ConsumerRebalanceListener {
    final String name;
    private final KafkaConsumer<String, String> consumer;
    private final String topic;
    private final Thread thread;
    private volatile boolean stopping;
    volatile Set<Integer> assignment = Set.of();
    volatile int generation = -1;
    volatile Throwable failure;
    final AtomicInteger records = new AtomicInteger();
    final AtomicInteger callbacks = new AtomicInteger();

    GroupMember(String name, Properties base, String bootstrap, String group, String topic, String assignor,
                String instanceId) {
        this(name, base, bootstrap, group, topic, assignor, instanceId, "classic");
    }

    /**
     * With protocol "consumer" (KIP-848) the broker assigns: the assignor is the server-side one
     * (group.remote.assignor), and the session and heartbeat are the broker's to set.
     */
    GroupMember(String name, Properties base, String bootstrap, String group, String topic, String assignor,
                String instanceId, String protocol) {
        this.name = name;
        this.topic = topic;
        Properties config = new Properties();
        config.putAll(base);
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put("group.protocol", protocol);
        if (protocol.equals("consumer")) {
            config.put("group.remote.assignor", assignor);
        } else {
            config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
            config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "30000");
            config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        if (instanceId != null) {
            config.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        consumer = new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer());
        thread = new Thread(this, name);
    }

    GroupMember start() {
        thread.start();
        return this;
    }

    /** Stops polling, commits, closes (a static member leaves no LeaveGroup behind) and waits. */
    void stop() throws InterruptedException {
        stopping = true;
        thread.join(60_000);
        if (thread.isAlive()) {
            throw new IllegalStateException(name + " did not stop within 60 s");
        }
    }

    @Override
    public void run() {
        try {
            consumer.subscribe(List.of(topic), this);
            while (!stopping) {
                int read = 0;
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                    read++;
                    Json.print("member", name, "key", record.key(), "partition", record.partition(),
                               "offset", record.offset());
                }
                if (read > 0) {
                    consumer.commitSync();
                    records.addAndGet(read);
                }
            }
        } catch (Throwable error) {
            failure = error;
            Json.print("member", name, "failure", error.toString());
        } finally {
            consumer.close();
        }
    }

    private void event(String kind, Collection<TopicPartition> partitions) {
        List<Integer> numbers = new ArrayList<>();
        for (TopicPartition partition : partitions) {
            numbers.add(partition.partition());
        }
        generation = consumer.groupMetadata().generationId();
        Json.print("member", name, "event", kind, "partitions", new TreeSet<>(numbers), "generation", generation);
        callbacks.incrementAndGet();
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        if (!partitions.isEmpty()) {
            consumer.commitSync();
        }
        Set<Integer> kept = new HashSet<>(assignment);
        for (TopicPartition partition : partitions) {
            kept.remove(partition.partition());
        }
        assignment = Set.copyOf(kept);
        event("revoked", partitions);
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        Set<Integer> now = new HashSet<>(assignment);
        for (TopicPartition partition : partitions) {
            now.add(partition.partition());
        }
        assignment = Set.copyOf(now);
        event("assigned", partitions);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
        assignment = Set.of();
        event("lost", partitions);
    }
}
