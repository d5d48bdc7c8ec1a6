package io.kbroker.compat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * A Kafka Streams application under exactly-once (v2) on kbroker: words from {@code in} are counted in a
 * RocksDB store and in hour windows, each behind a repartition topic, with changelogs Streams creates itself;
 * the counts go to {@code out} and {@code windowed}. The word of record i is "w" + (i % WORDS), so after n*WORDS
 * records every count is n, and a count above it anywhere is a record processed twice.
 */
final class WordCount implements AutoCloseable {
    static final int WORDS = 50;

    private final KafkaStreams streams;
    private final Path stateDir;

    WordCount(String bootstrap, String app, String in, String out, String windowed, int replicas) throws Exception {
        this(bootstrap, app, in, out, windowed, replicas, "classic");
    }

    /** {@code protocol}: the group protocol, "classic" (Streams' default) or "streams" (KIP-1071). */
    WordCount(String bootstrap, String app, String in, String out, String windowed, int replicas, String protocol)
            throws Exception {
        StreamsBuilder builder = new StreamsBuilder();
        var words = builder.stream(in, Consumed.with(Serdes.String(), Serdes.String()));
        words.groupBy((k, v) -> v, Grouped.with("by-word", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream().to(out, Produced.with(Serdes.String(), Serdes.Long()));
        words.groupBy((k, v) -> v, Grouped.with("by-word-hourly", Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofHours(1)))
            .count(Materialized.as("hourly-counts"))
            .toStream((window, count) -> window.key()).to(windowed, Produced.with(Serdes.String(), Serdes.Long()));
        stateDir = Files.createTempDirectory("kbroker-streams");
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "2");
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, "1");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, String.valueOf(replicas));
        p.put(StreamsConfig.topicPrefix("min.insync.replicas"), String.valueOf(Math.min(replicas, 2)));
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "10000");
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        streams = new KafkaStreams(builder.build(), p);
        streams.start();
    }

    /** What a scenario checks at one of its points, given the application id. */
    interface Check {
        void run(String app) throws Exception;
    }

    /**
     * The scenario both group protocols run on one broker: two instances count; the first leaves (its tasks
     * move to the second, which had them as standbys or restores them from their changelogs); a third with
     * an empty state directory joins and the second leaves after it. Every count stays exact. {@code whileTwo}
     * runs once the two first instances have counted the first records.
     */
    static void instancesComeAndGo(KBroker broker, String protocol, Check whileTwo) throws Exception {
        String in = Clients.name("words"), out = Clients.name("counts"), windowed = Clients.name("hourly");
        String app = Clients.name("wc");
        for (String topic : new String[] {in, out, windowed}) {
            Clients.createTopic(broker, topic, 4);
        }
        String bootstrap = broker.bootstrap();
        int step = 20 * WORDS;
        try (WordCount first = new WordCount(bootstrap, app, in, out, windowed, 1, protocol);
             WordCount second = new WordCount(bootstrap, app, in, out, windowed, 1, protocol)) {
            send(bootstrap, in, 0, step);
            awaitCounts(bootstrap, out, 20);
            whileTwo.run(app);
            first.close();
            send(bootstrap, in, step, 2 * step);
            awaitCounts(bootstrap, out, 40);
            try (WordCount third = new WordCount(bootstrap, app, in, out, windowed, 1, protocol)) {
                second.close();
                send(bootstrap, in, 2 * step, 3 * step);
                awaitCounts(bootstrap, out, 60);
                awaitCounts(bootstrap, windowed, 60);
            }
        }
        assertNoCountPast(bootstrap, out, 60);
        assertNoCountPast(bootstrap, windowed, 60);
    }

    /** Records {@code from} to {@code to} - 1 into {@code in}, each acknowledged by every in-sync replica. */
    static void send(String bootstrap, String in, int from, int to) {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(Clients.props(bootstrap, "acks", "all",
                "enable.idempotence", "true", "delivery.timeout.ms", "60000"),
                new StringSerializer(), new StringSerializer())) {
            for (int i = from; i < to; i++) {
                producer.send(new ProducerRecord<>(in, String.valueOf(i), "w" + (i % WORDS)));
            }
        }
    }

    /**
     * Each word's latest committed count in {@code topic}, read until every word has {@code expected}; fails
     * if any record of the topic carries more than that (a record counted twice).
     */
    static Map<String, Long> awaitCounts(String bootstrap, String topic, long expected) throws Exception {
        Map<String, Long> latest = new HashMap<>();
        long[] most = {0};
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(Clients.props(bootstrap, "group.id",
                Clients.name("reader"), "auto.offset.reset", "earliest", "isolation.level", "read_committed"),
                new StringDeserializer(), new LongDeserializer())) {
            c.subscribe(List.of(topic));
            Clients.waitUntil(() -> {
                for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(200))) {
                    latest.put(r.key(), r.value());
                    most[0] = Math.max(most[0], r.value());
                }
                return most[0] > expected
                    || latest.size() == WORDS && latest.values().stream().allMatch(v -> v == expected);
            }, Duration.ofSeconds(120), topic + "'s counts at " + expected);
        }
        if (most[0] > expected) {
            throw new AssertionError(topic + " counted a word " + most[0] + " times, past " + expected);
        }
        return latest;
    }

    /** Every record in {@code topic} up to its last stable offset: a word counted past {@code expected} fails. */
    static void assertNoCountPast(String bootstrap, String topic, long expected) {
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(Clients.props(bootstrap,
                "isolation.level", "read_committed"), new StringDeserializer(), new LongDeserializer())) {
            List<TopicPartition> partitions = c.partitionsFor(topic).stream()
                .map(info -> new TopicPartition(topic, info.partition())).toList();
            c.assign(partitions);
            c.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = c.endOffsets(partitions);
            long deadline = System.currentTimeMillis() + 60_000;
            while (partitions.stream().anyMatch(tp -> c.position(tp) < ends.get(tp))) {
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError(topic + " not read to its end in 60 s");
                }
                for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(200))) {
                    if (r.value() > expected) {
                        throw new AssertionError(topic + " counted " + r.key() + " " + r.value() + " times");
                    }
                }
            }
        }
    }

    @Override
    public void close() throws Exception {
        streams.close(Duration.ofSeconds(30));   // (again is nothing: a test may close it before its end)
        KBroker.removeTree(stateDir);
    }
}
