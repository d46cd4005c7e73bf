import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Exit;

/**
 * For each codec of --compression (a comma-separated list), one producer with acks=all,
 * idempotent unless --idempotent false, sends --count keyed records to --topic: key
 * "PREFIX-CODEC-000042", a value that starts with the key. All producers run at once. Prints one
 * JSON line per acknowledged record ({"key","partition","offset"}), one per failed send
 * ({"key","error"}), then {"done":true,"acked":N,"failed":M}. Exits 1 when a send failed.
 */
public final class Produce {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.get("topic");
        String prefix = args.get("prefix");
        int count = args.integer("count");
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        List<KafkaProducer<String, String>> producers = new ArrayList<>();
        try {
            for (String codec : args.get("compression", "none").split(",")) {
                Properties config = Json.load(args.get("config", "-"));
                config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
                config.put(ProducerConfig.ACKS_CONFIG, "all");
                config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, args.get("idempotent", "true"));
                config.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
                config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
                config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, args.get("delivery-timeout-ms", "60000"));
                config.put(ProducerConfig.CLIENT_ID_CONFIG, prefix + "-" + codec);
                KafkaProducer<String, String> producer =
                    new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
                producers.add(producer);
                for (int i = 0; i < count; i++) {
                    String key = String.format("%s-%s-%06d", prefix, codec, i);
                    // Repetitive values, so that every codec has something to compress.
                    String value = key + " " + "payload ".repeat(8);
                    producer.send(new ProducerRecord<>(topic, key, value), (metadata, error) -> {
                        if (error != null) {
                            failed.incrementAndGet();
                            Json.print("key", key, "error", error.toString());
                        } else {
                            acked.incrementAndGet();
                            Json.print("key", key, "partition", metadata.partition(), "offset", metadata.offset());
                        }
                    });
                }
            }
            for (KafkaProducer<String, String> producer : producers) {
                producer.flush();
            }
        } finally {
            for (KafkaProducer<String, String> producer : producers) {
                producer.close();
            }
        }
        Json.print("done", true, "acked", acked.get(), "failed", failed.get());
        Exit.exit(failed.get() == 0 ? 0 : 1);
    }
}
