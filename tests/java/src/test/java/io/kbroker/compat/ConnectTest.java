package io.kbroker.compat;

import static io.kbroker.compat.Clients.createTopic;
import static io.kbroker.compat.Clients.name;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/**
 * Kafka Connect's distributed worker on kbroker: its compacted config, offset and status topics, its group,
 * and exactly-once source support (KIP-618: each task's records and source offsets in one transaction, a
 * task's earlier producers fenced when it starts again).
 */
class ConnectTest extends OneBroker {
    static final int COUNT = 3000;

    /** The topic's last stable offset: what a read_committed consumer sees of it. */
    static long stable(String topic) {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(Clients.props(broker, "isolation.level",
                "read_committed"), new StringDeserializer(), new StringDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            return c.endOffsets(List.of(tp)).get(tp);
        }
    }

    static void createConnector(ConnectWorker worker, String topic) throws Exception {
        String config = "{\"name\": \"count\", \"config\": {\"connector.class\": \"" + CountingSource.class.getName()
            + "\", \"tasks.max\": \"1\", \"topic\": \"" + topic + "\", \"count\": \"" + COUNT + "\", "
            + "\"exactly.once.support\": \"required\", \"transaction.boundary\": \"poll\"}}";
        HttpResponse<String> answer = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create(worker.rest() + "connectors")).header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(config)).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(201, answer.statusCode(), answer.body());
    }

    @Test
    void anExactlyOnceSourceKilledMidStreamResumesOnAnotherWorkerWithoutARepeat() throws Exception {
        String topic = name("connect"), group = name("connect-cluster");
        createTopic(broker, topic, 1);
        Path logs = Files.createTempDirectory("kbroker-connect");
        try (ConnectWorker first = ConnectWorker.start(broker.bootstrap(), group, logs.resolve("first.log"))) {
            createConnector(first, topic);
            Clients.waitUntil(() -> stable(topic) >= COUNT / 5, Duration.ofSeconds(60), "a fifth of the records");
            first.kill();
        }
        assertTrue(stable(topic) < COUNT, "the first worker wrote every record before it was killed");
        Map<String, Integer> seen = new HashMap<>();
        try (ConnectWorker second = ConnectWorker.start(broker.bootstrap(), group, logs.resolve("second.log"));
             KafkaConsumer<String, String> c = new KafkaConsumer<>(Clients.props(broker, "group.id", name("r"),
                 "auto.offset.reset", "earliest", "isolation.level", "read_committed"),
                 new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            Clients.waitUntil(() -> {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    seen.merge(r.value(), 1, Integer::sum);
                }
                return seen.size() == COUNT;
            }, Duration.ofSeconds(90), "every number once; have " + seen.size());
        }
        assertEquals(COUNT, seen.values().stream().mapToInt(Integer::intValue).sum(), "a number written twice");
        KBroker.removeTree(logs);
    }
}
