import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions of the Java producer against --input and --output:
 * 1. a producer with transactional.id PREFIX-writer commits --count records ("committed-1-N"),
 *    aborts --count ("aborted-N"); a second producer with the same id fences the first, whose
 *    next commit fails ({"fenced": exception}); the second commits --count more ("committed-2-N").
 * 2. consume-transform-produce: a read_committed member of --group reads --input, and a producer
 *    with transactional.id PREFIX-processor writes "processed KEY" to --output for each record,
 *    with the consumer's offsets in the same transaction (sendOffsetsToTransaction). Its second
 *    transaction is aborted, and the consumer goes back to its committed offsets, so that those
 *    records are processed again; it stops when transactions it committed processed the 2 * --count
 *    committed records of the input (or after 90 s).
 * Prints {"written","partition","offset","txn":"committed|aborted"} per input record,
 * {"processed","partition","offset","txn"} per output record, then {"committed_offsets":{p:o}} and
 * {"done":true}.
 */
public final class Transactions {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        Properties base = Json.load(args.get("config", "-"));
        String bootstrap = args.get("bootstrap");
        String input = args.get("input");
        String output = args.get("output");
        String prefix = args.get("prefix");
        int count = args.integer("count");

        try (KafkaProducer<String, String> first = producer(base, bootstrap, prefix + "-writer")) {
            first.initTransactions();
            write(first, input, "committed-1", count, true);
            write(first, input, "aborted", count, false);
            try (KafkaProducer<String, String> second = producer(base, bootstrap, prefix + "-writer")) {
                second.initTransactions();
                try {
                    first.beginTransaction();
                    first.send(new ProducerRecord<>(input, "zombie", "zombie"));
                    first.commitTransaction();
                    Json.print("fenced", null);
                } catch (KafkaException expected) {
                    Json.print("fenced", expected.getClass().getSimpleName());
                }
                write(second, input, "committed-2", count, true);
            }
        }

        Properties consumerConfig = new Properties();
        consumerConfig.putAll(base);
        consumerConfig.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerConfig.put(ConsumerConfig.GROUP_ID_CONFIG, args.get("group"));
        consumerConfig.put("group.protocol", "classic");
        consumerConfig.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerConfig.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerConfig.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerConfig.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(Math.max(1, count / 2)));
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(consumerConfig, new StringDeserializer(), new StringDeserializer());
             KafkaProducer<String, String> processor = producer(base, bootstrap, prefix + "-processor")) {
            processor.initTransactions();
            consumer.subscribe(List.of(input));
            long deadline = System.currentTimeMillis() + 90_000;
            int transactions = 0;
            int processed = 0;
            while (processed < 2 * count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                transactions++;
                boolean commit = transactions != 2;
                processor.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (ConsumerRecord<String, String> record : records) {
                    sent.add(processor.send(new ProducerRecord<>(output, record.key(), "processed " + record.key())));
                    next.put(new TopicPartition(record.topic(), record.partition()),
                             new OffsetAndMetadata(record.offset() + 1));
                }
                int at = 0;
                for (ConsumerRecord<String, String> record : records) {
                    var metadata = sent.get(at++).get();
                    Json.print("processed", record.key(), "partition", metadata.partition(),
                               "offset", metadata.offset(), "txn", commit ? "committed" : "aborted");
                }
                processor.sendOffsetsToTransaction(next, consumer.groupMetadata());
                if (commit) {
                    processor.commitTransaction();
                    processed += records.count();
                } else {
                    processor.abortTransaction();
                    rewind(consumer);
                }
            }
            Map<Integer, Long> committed = new HashMap<>();
            for (var entry : consumer.committed(consumer.assignment()).entrySet()) {
                committed.put(entry.getKey().partition(), entry.getValue() == null ? null : entry.getValue().offset());
            }
            Json.print("committed_offsets", committed);
        }
        Json.print("done", true);
    }

    private static KafkaProducer<String, String> producer(Properties base, String bootstrap, String transactionalId) {
        Properties config = new Properties();
        config.putAll(base);
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        config.put(ProducerConfig.CLIENT_ID_CONFIG, transactionalId);
        return new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
    }

    private static void write(KafkaProducer<String, String> producer, String topic, String tag, int count,
                              boolean commit) throws Exception {
        producer.beginTransaction();
        // Sent all at once, then each acknowledgement awaited: one round trip per batch, not per record.
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String key = String.format("%s-%06d", tag, i);
            sent.add(producer.send(new ProducerRecord<>(topic, key, key)));
        }
        for (int i = 0; i < count; i++) {
            var metadata = sent.get(i).get();
            Json.print("written", String.format("%s-%06d", tag, i), "partition", metadata.partition(),
                       "offset", metadata.offset(), "txn", commit ? "committed" : "aborted");
        }
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
    }

    /** Seeks every assigned partition back to the group's committed offset (the aborted
     * transaction took its offsets with it). */
    private static void rewind(KafkaConsumer<String, String> consumer) {
        for (var entry : consumer.committed(consumer.assignment()).entrySet()) {
            if (entry.getValue() == null) {
                consumer.seekToBeginning(List.of(entry.getKey()));
            } else {
                consumer.seek(entry.getKey(), entry.getValue().offset());
            }
        }
    }
}
