package io.kbroker.compat;

import static io.kbroker.compat.Clients.name;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The Java client on a replicated kbroker cluster (ZooKeeper, three brokers) while a partition leader dies. */
class ClusterTest {
    static KCluster cluster;

    @BeforeAll
    static void start() throws Exception {
        cluster = KCluster.start();
    }

    @AfterAll
    static void stop() throws Exception {
        cluster.close();
    }

    static Properties props(Object... keyValues) {
        Properties p = new Properties();
        p.put("bootstrap.servers", cluster.bootstrap());
        for (int i = 0; i < keyValues.length; i += 2) {
            p.put(keyValues[i], keyValues[i + 1]);
        }
        return p;
    }

    static void createReplicated(Admin admin, String topic, int partitions) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 3)
            .configs(Map.of("min.insync.replicas", "2")))).all().get();
    }

    static int leaderOf(Admin admin, String topic) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().get(0).leader().id();
    }

    @Test
    void transactionsCommittedAcrossALeaderKillAreReadOnceByANewProtocolConsumer() throws Exception {
        String topic = name("cluster-txn");
        try (Admin admin = Admin.create(props())) {
            createReplicated(admin, topic, 1);
            try (KafkaProducer<String, String> p = new KafkaProducer<>(props("transactional.id", name("txn"),
                    "delivery.timeout.ms", "60000", "request.timeout.ms", "10000"),
                    new StringSerializer(), new StringSerializer())) {
                p.initTransactions();
                for (int t = 0; t < 20; t++) {
                    if (t == 10) {
                        int leader = leaderOf(admin, topic);
                        cluster.kill(leader);
                        Clients.waitUntil(() -> {
                            try {
                                return leaderOf(admin, topic) != leader;
                            } catch (Exception e) {
                                return false;
                            }
                        }, Duration.ofSeconds(30), "a new leader");
                        cluster.start(leader);
                    }
                    p.beginTransaction();
                    for (int i = 0; i < 50; i++) {
                        p.send(new ProducerRecord<>(topic, String.valueOf(t * 50 + i)));
                    }
                    p.commitTransaction();
                }
            }
        }
        Set<String> got = new HashSet<>();
        int reads = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props("group.id", name("g"),
                "group.protocol", "consumer", "auto.offset.reset", "earliest", "isolation.level", "read_committed"),
                new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < 1000 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                    reads++;
                }
            }
        }
        assertEquals(1000, got.size());
        assertEquals(1000, reads);
    }

    @Test
    void shareConsumersAcceptEveryRecordOnceAcrossAShareLeaderKill() throws Exception {
        String topic = name("cluster-share");
        String group = name("s");
        try (Admin admin = Admin.create(props())) {
            createReplicated(admin, topic, 1);
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all().get();
            try (KafkaProducer<String, String> p = new KafkaProducer<>(props("acks", "all"), new StringSerializer(),
                    new StringSerializer())) {
                for (int i = 0; i < 500; i++) {
                    p.send(new ProducerRecord<>(topic, String.valueOf(i)));
                }
            }
            List<Long> accepted = new ArrayList<>();
            try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(props("group.id", group,
                    "share.acknowledgement.mode", "explicit"), new StringDeserializer(), new StringDeserializer())) {
                c.subscribe(List.of(topic));
                boolean killed = false;
                long deadline = System.currentTimeMillis() + 120_000;
                while (new HashSet<>(accepted).size() < 500 && System.currentTimeMillis() < deadline) {
                    List<Long> batch = new ArrayList<>();
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        batch.add(r.offset());
                    }
                    try {
                        var results = c.commitSync();
                        if (results.values().stream().allMatch(java.util.Optional::isEmpty)) {
                            accepted.addAll(batch);
                        }
                    } catch (Exception e) {
                        // a commit lost with the leader: those records come again
                    }
                    if (!killed && accepted.size() >= 200) {
                        int leader = leaderOf(admin, topic);
                        cluster.kill(leader);
                        killed = true;
                        Clients.waitUntil(() -> {
                            try {
                                return leaderOf(admin, topic) != leader;
                            } catch (Exception e) {
                                return false;
                            }
                        }, Duration.ofSeconds(30), "a new leader");
                        cluster.start(leader);
                    }
                }
            }
            assertEquals(500, new HashSet<>(accepted).size());
            assertEquals(accepted.size(), new HashSet<>(accepted).size(), "a record accepted twice");
        }
    }

    /** Which broker a scenario kills, given the admin client, the input topic and the application id. */
    interface Victim {
        int of(Admin admin, String in, String app) throws Exception;
    }

    @Test
    void aStreamsApplicationCountsEachWordOnceAcrossALeaderKill() throws Exception {
        // Kafka Streams under exactly-once v2 with its internal topics replicated three times: the broker
        // leading the input's first partition is killed mid-stream and restarted; every count stays exact.
        countsStayExactAcrossAKill("classic", (admin, in, app) -> leaderOf(admin, in));
    }

    @Test
    void aStreamsGroupCountsEachWordOnceAcrossItsCoordinatorsKill() throws Exception {
        // The same application on the streams group protocol (KIP-1071): the broker coordinating its group is
        // killed mid-stream; the group (topology, members, tasks) is replayed from __consumer_offsets by the
        // next coordinator, the members carry on there, and every count stays exact.
        countsStayExactAcrossAKill("streams", (admin, in, app) ->
            admin.describeStreamsGroups(List.of(app)).all().get().get(app).coordinator().id());
    }

    private void countsStayExactAcrossAKill(String protocol, Victim victim) throws Exception {
        String in = name("cluster-words"), out = name("cluster-counts"), windowed = name("cluster-hourly");
        String bootstrap = cluster.bootstrap(), app = name("cluster-wc");
        int step = 10 * WordCount.WORDS;
        try (Admin admin = Admin.create(props())) {
            for (String topic : new String[] {in, out, windowed}) {
                createReplicated(admin, topic, 2);
            }
            try (WordCount counting = new WordCount(bootstrap, app, in, out, windowed, 3, protocol)) {
                WordCount.send(bootstrap, in, 0, step);
                WordCount.awaitCounts(bootstrap, out, 10);
                int killed = victim.of(admin, in, app);
                cluster.kill(killed);
                WordCount.send(bootstrap, in, step, 2 * step);
                cluster.start(killed);
                WordCount.send(bootstrap, in, 2 * step, 3 * step);
                WordCount.awaitCounts(bootstrap, out, 30);
                WordCount.awaitCounts(bootstrap, windowed, 30);
            }
        }
        WordCount.assertNoCountPast(bootstrap, out, 30);
        WordCount.assertNoCountPast(bootstrap, windowed, 30);
    }
}
