import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Exit;

/**
 * Members of one consumer group join, share --topic (--partitions partitions) with the
 * --assignor (with --protocol consumer, KIP-848's server-side assignor; default --protocol
 * classic), read what is produced, and change, printing a {"phase"} line at each step (the
 * lines of GroupMember between them):
 *   --scenario join-leave: member a alone, then b joins ("joined"); --count records are produced
 *   and read; b leaves ("left"); --count more are produced and read by a.
 *   --scenario static: static members a and b (group.instance.id a and b); --count records; then
 *   each in turn is closed and started again with the same instance id ("restart-b",
 *   "restart-a"), --count records after each.
 * Every produced record is printed ({"produced":key,"partition","offset"}). Ends with
 * {"done":true}; exits 1 (with {"failure"}) when a step did not happen within its time.
 */
public final class GroupScenario {
    private static final long STEP_TIMEOUT_MS = 60_000;

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        Properties base = Json.load(args.get("config", "-"));
        String bootstrap = args.get("bootstrap");
        String topic = args.get("topic");
        String group = args.get("group");
        String assignor = args.get("assignor");
        int partitions = args.integer("partitions");
        int count = args.integer("count");
        boolean isStatic = args.get("scenario").equals("static");
        String protocol = args.get("protocol", "classic");
        Properties producerConfig = new Properties();
        producerConfig.putAll(base);
        producerConfig.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerConfig.put(ProducerConfig.ACKS_CONFIG, "all");
        List<GroupMember> members = new ArrayList<>();
        // Every member ever started: what the stopped ones read counts too.
        List<GroupMember> everyone = new ArrayList<>();
        int produced = 0;
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(producerConfig, new StringSerializer(), new StringSerializer())) {
            GroupMember a = new GroupMember("a", base, bootstrap, group, topic, assignor, isStatic ? "a" : null, protocol);
            members.add(a.start());
            everyone.add(a);
            if (!isStatic) {
                await("a holds every partition", () -> a.assignment.size() == partitions);
            }
            GroupMember b = new GroupMember("b", base, bootstrap, group, topic, assignor, isStatic ? "b" : null, protocol);
            members.add(b.start());
            everyone.add(b);
            Json.print("phase", "joined");
            awaitShared(members, partitions);
            produced = produce(producer, topic, "first", count, produced);
            awaitRead(everyone, produced);
            if (!isStatic) {
                Json.print("phase", "left");
                b.stop();
                members.remove(b);
                await("a holds every partition again", () -> a.assignment.size() == partitions);
                produced = produce(producer, topic, "second", count, produced);
                awaitRead(everyone, produced);
            } else {
                for (String name : List.of("b", "a")) {
                    Json.print("phase", "restart-" + name);
                    GroupMember old = members.stream().filter(m -> m.name.equals(name)).findFirst().orElseThrow();
                    old.stop();
                    members.remove(old);
                    GroupMember again =
                        new GroupMember(name + "2", base, bootstrap, group, topic, assignor, name, protocol);
                    members.add(again.start());
                    everyone.add(again);
                    awaitShared(members, partitions);
                    produced = produce(producer, topic, "after-" + name, count, produced);
                    awaitRead(everyone, produced);
                }
            }
            Json.print("phase", "end");
        } catch (IllegalStateException timedOut) {
            Json.print("failure", timedOut.getMessage());
            stopAll(members);
            Exit.exit(1);
        }
        stopAll(members);
        Json.print("done", true);
    }

    private static void stopAll(List<GroupMember> members) throws InterruptedException {
        for (GroupMember member : members) {
            member.stop();
        }
    }

    private static int produce(KafkaProducer<String, String> producer, String topic, String tag, int count,
                               int produced) throws Exception {
        // Sent all at once, then each acknowledgement awaited: one round trip per batch, not per record.
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String key = String.format("%s-%06d", tag, i);
            sent.add(producer.send(new ProducerRecord<>(topic, key, key)));
        }
        for (int i = 0; i < count; i++) {
            var metadata = sent.get(i).get();
            Json.print("produced", String.format("%s-%06d", tag, i), "partition", metadata.partition(),
                       "offset", metadata.offset());
        }
        return produced + count;
    }

    /** Waits until the members' assignments are disjoint, cover every partition and none is empty. */
    private static void awaitShared(List<GroupMember> members, int partitions) {
        await("the members share every partition", () -> {
            Set<Integer> union = new HashSet<>();
            int total = 0;
            for (GroupMember member : members) {
                if (member.assignment.isEmpty()) {
                    return false;
                }
                union.addAll(member.assignment);
                total += member.assignment.size();
            }
            return union.size() == partitions && total == partitions;
        });
    }

    private static void awaitRead(List<GroupMember> members, int produced) {
        await(produced + " records read", () -> {
            int read = 0;
            for (GroupMember member : members) {
                read += member.records.get();
            }
            return read >= produced;
        });
    }

    private static void await(String what, BooleanSupplier condition) {
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException(what + ": not within " + STEP_TIMEOUT_MS + " ms");
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException interrupted) {
                throw new IllegalStateException(what + ": interrupted");
            }
        }
    }
}
