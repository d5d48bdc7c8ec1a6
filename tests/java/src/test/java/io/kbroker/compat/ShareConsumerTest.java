package io.kbroker.compat;

import static io.kbroker.compat.Clients.createTopic;
import static io.kbroker.compat.Clients.name;
import static io.kbroker.compat.Clients.produce;
import static io.kbroker.compat.Clients.props;
import static io.kbroker.compat.Clients.setGroupConfigs;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** KafkaShareConsumer (KIP-932), implicit and explicit acknowledgement, with delivery counts. */
class ShareConsumerTest {
    static KBroker broker;

    @BeforeAll
    static void start() throws Exception {
        broker = KBroker.start();
    }

    @AfterAll
    static void stop() throws Exception {
        broker.close();
    }

    static KafkaShareConsumer<String, String> shareConsumer(String group, String mode) {
        return new KafkaShareConsumer<>(props(broker, "group.id", group, "share.acknowledgement.mode", mode),
                new StringDeserializer(), new StringDeserializer());
    }

    @Test
    void implicitAcknowledgementAcceptsEveryRecordOnce() throws Exception {
        String topic = name("share-implicit");
        createTopic(broker, topic, 2);
        String group = name("s");
        setGroupConfigs(broker, group, Map.of("share.auto.offset.reset", "earliest"));
        produce(broker, topic, 100);
        List<String> got = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = shareConsumer(group, "implicit")) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < 100 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                }
            }
            c.commitSync();
        }
        assertEquals(100, got.size());
        assertEquals(100, got.stream().distinct().count());
    }

    @Test
    void explicitAcknowledgementReleasesRejectsAndCountsDeliveries() throws Exception {
        String topic = name("share-explicit");
        createTopic(broker, topic, 1);
        String group = name("s");
        setGroupConfigs(broker, group, Map.of("share.auto.offset.reset", "earliest"));
        produce(broker, topic, 6);
        Map<Long, List<Short>> deliveries = new TreeMap<>();
        Map<Long, Integer> accepted = new HashMap<>();
        try (KafkaShareConsumer<String, String> c = shareConsumer(group, "explicit")) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (accepted.size() < 5 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    short count = r.deliveryCount().orElse((short) -1);
                    deliveries.computeIfAbsent(r.offset(), o -> new ArrayList<>()).add(count);
                    if (r.offset() < 2 && count == 1) {
                        c.acknowledge(r, AcknowledgeType.RELEASE);     // 0 and 1 come back once
                    } else if (r.offset() == 2) {
                        c.acknowledge(r, AcknowledgeType.REJECT);      // 2 never comes back
                    } else {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        accepted.merge(r.offset(), 1, Integer::sum);
                    }
                }
                c.commitSync();
            }
        }
        assertEquals(Map.of(0L, 1, 1L, 1, 3L, 1, 4L, 1, 5L, 1), accepted);
        assertEquals(List.of((short) 1, (short) 2), deliveries.get(0L));
        assertEquals(List.of((short) 1, (short) 2), deliveries.get(1L));
        assertEquals(List.of((short) 1), deliveries.get(2L));
    }
}
