package io.kbroker.compat;

import static io.kbroker.compat.Clients.createTopic;
import static io.kbroker.compat.Clients.name;
import static io.kbroker.compat.Clients.produce;
import static io.kbroker.compat.Clients.props;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

/** The idempotent and the transactional producer, the classic consumer and the KIP-848 consumer. */
class ProducersAndConsumersTest extends OneBroker {
    static KafkaConsumer<String, String> consumer(String group, Object... more) {
        Object[] base = {"group.id", group, "auto.offset.reset", "earliest", "enable.auto.commit", "false"};
        Object[] all = new Object[base.length + more.length];
        System.arraycopy(base, 0, all, 0, base.length);
        System.arraycopy(more, 0, all, base.length, more.length);
        return new KafkaConsumer<>(props(broker, all), new StringDeserializer(), new StringDeserializer());
    }

    static List<String> consumeAll(List<KafkaConsumer<String, String>> consumers, int count) {
        List<String> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 60_000;
        while (got.size() < count && System.currentTimeMillis() < deadline) {
            for (KafkaConsumer<String, String> c : consumers) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                    got.add(r.value());
                }
                c.commitSync();
            }
        }
        return got;
    }

    @Test
    void anIdempotentProducersRecordsReachAClassicCooperativeStickyGroup() throws Exception {
        String topic = name("classic");
        createTopic(broker, topic, 3);
        List<String> sent = produce(broker, topic, 300);
        try (KafkaConsumer<String, String> c = consumer(name("g"), "partition.assignment.strategy",
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor", "group.instance.id", "static-1")) {
            c.subscribe(List.of(topic));
            List<String> got = consumeAll(List.of(c), 300);
            assertEquals(new HashSet<>(sent), new HashSet<>(got));
            assertEquals(300, got.size());
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
            assertEquals(300, committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum());
        }
    }

    @Test
    void twoConsumersOfTheNewProtocolSplitThePartitionsAndReadEachRecordOnce() throws Exception {
        String topic = name("kip848");
        createTopic(broker, topic, 4);
        String group = name("g");
        try (KafkaConsumer<String, String> a = consumer(group, "group.protocol", "consumer");
             KafkaConsumer<String, String> b = consumer(group, "group.protocol", "consumer")) {
            a.subscribe(List.of(topic));
            b.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while ((a.assignment().size() != 2 || b.assignment().size() != 2) && System.currentTimeMillis() < deadline) {
                a.poll(Duration.ofMillis(50));
                b.poll(Duration.ofMillis(50));
            }
            assertEquals(2, a.assignment().size());
            assertEquals(2, b.assignment().size());
            Set<TopicPartition> all = new HashSet<>(a.assignment());
            all.addAll(b.assignment());
            assertEquals(4, all.size());
            List<String> sent = produce(broker, topic, 200);
            List<String> got = consumeAll(List.of(a, b), 200);
            assertEquals(200, got.size());
            assertEquals(new HashSet<>(sent), new HashSet<>(got));
        }
    }

    @Test
    void aTopicsOwnCodecIsWhatItsConsumerReads() throws Exception {
        // The producer sends with another codec than the topic's: the broker recompresses, and the Java consumer
        // reads what kbroker wrote (its LZ4 frames too, which must have independent blocks).
        for (String codec : List.of("lz4", "zstd", "gzip", "snappy", "uncompressed")) {
            String topic = name("codec-" + codec);
            try (Admin admin = Clients.admin(broker)) {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1)
                    .configs(Map.of("compression.type", codec)))).all().get();
            }
            List<String> sent = new ArrayList<>();
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(props(broker, "compression.type",
                    codec.equals("gzip") ? "lz4" : "gzip", "linger.ms", "20"), new StringSerializer(),
                    new StringSerializer())) {
                for (int i = 0; i < 200; i++) {
                    String value = "value " + i + " " + "z".repeat(200);
                    producer.send(new ProducerRecord<>(topic, String.valueOf(i), value));
                    sent.add(value);
                }
                producer.flush();
            }
            try (KafkaConsumer<String, String> c = consumer(name("g"))) {
                c.subscribe(List.of(topic));
                assertEquals(sent, consumeAll(List.of(c), 200), codec);
            }
        }
    }

    /** Polls each consumer in turn until {@code done} holds; their records go to {@code got}. */
    static void pollUntil(List<KafkaConsumer<String, String>> consumers, List<String> got, BooleanSupplier done) {
        long deadline = System.currentTimeMillis() + 60_000;
        while (!done.getAsBoolean() && System.currentTimeMillis() < deadline) {
            for (KafkaConsumer<String, String> c : consumers) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(50))) {
                    got.add(r.value());
                }
                try {
                    c.commitSync();
                } catch (RebalanceInProgressException e) {
                    // A classic member that has just learned of a rebalance (a member joining, the group's
                    // conversion) fails the commit on its own side until its next poll rejoins: non-fatal, as
                    // Kafka's client says. The next poll rejoins and the next commit covers these records.
                }
            }
        }
    }

    static GroupType typeOf(String group) throws Exception {
        try (Admin admin = Clients.admin(broker)) {
            return admin.describeConsumerGroups(List.of(group)).all().get().get(group).type();
        }
    }

    @Test
    void aRunningClassicGroupMovesToTheConsumerProtocolAndBack() throws Exception {
        String topic = name("migrate");
        createTopic(broker, topic, 4);
        String group = name("g");
        List<String> sent = produce(broker, topic, 400);
        List<String> got = new ArrayList<>();
        String cooperative = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
        try (KafkaConsumer<String, String> classic = consumer(group, "partition.assignment.strategy", cooperative,
                "max.poll.records", "20")) {
            classic.subscribe(List.of(topic));
            pollUntil(List.of(classic), got, () -> classic.assignment().size() == 4 && got.size() >= 40);
            assertEquals(GroupType.CLASSIC, typeOf(group));
            try (KafkaConsumer<String, String> modern = consumer(group, "group.protocol", "consumer",
                    "max.poll.records", "20")) {
                modern.subscribe(List.of(topic));   // its first heartbeat converts the running group
                pollUntil(List.of(classic, modern), got,
                        () -> classic.assignment().size() == 2 && modern.assignment().size() == 2);
                assertEquals(2, classic.assignment().size());
                assertEquals(2, modern.assignment().size());
                assertEquals(GroupType.CONSUMER, typeOf(group));
            }   // the last member of the new protocol leaves: the group is classic again
            pollUntil(List.of(classic), got, () -> classic.assignment().size() == 4 && got.size() >= 400);
            assertEquals(GroupType.CLASSIC, typeOf(group));
        }
        assertEquals(new HashSet<>(sent), new HashSet<>(got));
    }

    @Test
    void aTransactionalConsumeTransformProduceLoopCommitsOffsetsWithItsOutputAndAnAbortLeavesNothing()
            throws Exception {
        String input = name("in");
        String output = name("out");
        createTopic(broker, input, 1);
        createTopic(broker, output, 1);
        produce(broker, input, 50);
        String group = name("g");
        try (KafkaConsumer<String, String> c = consumer(group, "isolation.level", "read_committed");
             KafkaProducer<String, String> p = new KafkaProducer<>(props(broker, "transactional.id", name("txn")),
                     new StringSerializer(), new StringSerializer())) {
            p.initTransactions();
            c.subscribe(List.of(input));
            int copied = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (copied < 50 && System.currentTimeMillis() < deadline) {
                var records = c.poll(Duration.ofMillis(100));
                if (records.isEmpty()) {
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    p.send(new ProducerRecord<>(output, r.key(), "copy-" + r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    copied++;
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                p.commitTransaction();
            }
            assertEquals(50, copied);
            p.beginTransaction();
            p.send(new ProducerRecord<>(output, "aborted", "aborted"));
            p.abortTransaction();
            TopicPartition in = new TopicPartition(input, 0);
            assertEquals(50, c.committed(Set.of(in)).get(in).offset());
        }
        try (KafkaConsumer<String, String> reader = consumer(name("reader"), "isolation.level", "read_committed")) {
            reader.subscribe(List.of(output));
            List<String> got = consumeAll(List.of(reader), 50);
            assertEquals(50, got.size());
            assertFalse(got.contains("aborted"));
            assertTrue(got.stream().allMatch(v -> v.startsWith("copy-")));
            assertTrue(reader.poll(Duration.ofMillis(500)).isEmpty(), "the aborted record is never read");
        }
    }

    @Test
    void aProducerOfTransactionsV2EndsEachTransactionUnderTheNextEpoch() throws Exception {
        // kbroker finalizes transaction.version 2, so the client ends each transaction with EndTxn v5 (which
        // bumps the epoch) and lets the leader add the partition from Produce v12: after three commits the
        // coordinator and the partition both know epoch 3, and the fourth transaction still lands.
        String topic = name("v2");
        createTopic(broker, topic, 1);
        String transactionalId = name("txn-v2");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(props(broker, "transactional.id", transactionalId),
                new StringSerializer(), new StringSerializer());
             Admin admin = Clients.admin(broker)) {
            p.initTransactions();
            for (int i = 0; i < 3; i++) {
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, "k", "v" + i));
                p.commitTransaction();
            }
            TransactionDescription described = admin.describeTransactions(List.of(transactionalId))
                    .description(transactionalId).get();
            assertEquals(3, described.producerEpoch());
            TopicPartition tp = new TopicPartition(topic, 0);
            List<ProducerState> producers = admin.describeProducers(List.of(tp)).partitionResult(tp).get()
                    .activeProducers();
            assertEquals(1, producers.size());
            assertEquals(3, producers.get(0).producerEpoch());
            assertTrue(producers.get(0).currentTransactionStartOffset().isEmpty());
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "k", "v3"));
            p.commitTransaction();
        }
        try (KafkaConsumer<String, String> reader = consumer(name("reader"), "isolation.level", "read_committed")) {
            reader.subscribe(List.of(topic));
            assertEquals(List.of("v0", "v1", "v2", "v3"), consumeAll(List.of(reader), 4));
        }
    }
}
