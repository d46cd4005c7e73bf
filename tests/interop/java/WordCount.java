import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Kafka Streams' word count, exactly_once_v2: lines of --input are split into words, regrouped by
 * word (the repartition topic APP-words-repartition), counted in the state store "counts" (its
 * compacted changelog APP-counts-changelog), and every new count is written to --output (key the
 * word, value the count as a long). The record cache is off, so that each word read gives exactly
 * one update. Runs until stopped (SIGTERM closes it cleanly); prints {"state": NEW_STATE} at every
 * change of state and {"error": ...} when a thread dies.
 */
public final class WordCount {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        Properties config = Json.load(args.get("config", "-"));
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, args.get("application-id"));
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        config.put(StreamsConfig.STATE_DIR_CONFIG, args.get("state-dir"));
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        config.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(args.get("input"));
        lines.flatMapValues(line -> Arrays.asList(line.split(" ")))
             .groupBy((key, word) -> word, Grouped.as("words"))
             .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                                .withValueSerde(Serdes.Long()))
             .toStream()
             .to(args.get("output"), Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> Json.print("state", now.toString()));
        streams.setUncaughtExceptionHandler(error -> {
            Json.print("error", error.toString());
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                .REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
    }
}
