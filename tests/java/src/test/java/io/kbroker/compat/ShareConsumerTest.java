package io.kbroker.compat;

import static io.kbroker.compat.Clients.createTopic;
import static io.kbroker.compat.Clients.name;
import static io.kbroker.compat.Clients.produce;
import static io.kbroker.compat.Clients.shareGroupFromStart;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.junit.jupiter.api.Test;

/** KafkaShareConsumer (KIP-932): implicit and explicit acknowledgement with delivery counts, a lock renewed
 * (AcknowledgeType.RENEW, ShareAcknowledge v2) and the record-limit acquire mode (ShareFetch v2). */
class ShareConsumerTest extends OneBroker {
    static KafkaShareConsumer<String, String> shareConsumer(String group, String mode) {
        return Clients.shareConsumer(broker, group, mode);
    }

    @Test
    void implicitAcknowledgementAcceptsEveryRecordOnce() throws Exception {
        String topic = name("share-implicit");
        createTopic(broker, topic, 2);
        String group = shareGroupFromStart(broker, Map.of());
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
        String group = shareGroupFromStart(broker, Map.of());
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

    @Test
    void renewKeepsARecordWithItsMemberPastTheLockDuration() throws Exception {
        String topic = name("share-renew");
        createTopic(broker, topic, 1);
        String group = shareGroupFromStart(broker, Map.of("share.record.lock.duration.ms", "1000"));
        produce(broker, topic, 1);
        List<Short> holderDeliveries = new ArrayList<>();
        int otherGot = 0;
        try (KafkaShareConsumer<String, String> holder = shareConsumer(group, "explicit");
             KafkaShareConsumer<String, String> other = shareConsumer(group, "explicit")) {
            holder.subscribe(List.of(topic));
            other.subscribe(List.of(topic));
            ConsumerRecord<String, String> held = null;
            long deadline = System.currentTimeMillis() + 60_000;
            while (held == null && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : holder.poll(Duration.ofMillis(200))) {
                    held = r;
                }
                for (ConsumerRecord<String, String> r : other.poll(Duration.ofMillis(10))) {
                    other.acknowledge(r, AcknowledgeType.RELEASE);   // (the other got it first: let it come back)
                }
            }
            holderDeliveries.add(held.deliveryCount().orElse((short) -1));
            // Three lock durations: the holder renews; the other member, fetching all along, never gets it.
            long until = System.currentTimeMillis() + 3_000;
            while (System.currentTimeMillis() < until) {
                holder.acknowledge(held, AcknowledgeType.RENEW);
                holder.commitSync();
                for (ConsumerRecord<String, String> r : holder.poll(Duration.ofMillis(300))) {
                    held = r;                                        // the renewed record comes back to it
                    holderDeliveries.add(r.deliveryCount().orElse((short) -1));
                }
                for (ConsumerRecord<String, String> r : other.poll(Duration.ofMillis(10))) {
                    otherGot++;
                    other.acknowledge(r, AcknowledgeType.RELEASE);
                }
            }
            holder.acknowledge(held, AcknowledgeType.ACCEPT);
            holder.commitSync();
            long quiet = System.currentTimeMillis() + 1_500;
            while (System.currentTimeMillis() < quiet) {
                otherGot += other.poll(Duration.ofMillis(100)).count();
            }
        }
        assertEquals(0, otherGot);
        assertTrue(holderDeliveries.size() >= 3, "the renewed record comes back to its holder: " + holderDeliveries);
        assertEquals(1, holderDeliveries.stream().distinct().count(), "renewed, never delivered again: "
                + holderDeliveries);
    }

    @Test
    void recordLimitModeNeverReturnsMoreThanMaxPollRecords() throws Exception {
        String topic = name("share-limit");
        createTopic(broker, topic, 1);
        String group = shareGroupFromStart(broker, Map.of());
        produce(broker, topic, 50);
        List<Integer> sizes = new ArrayList<>();
        List<String> got = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = Clients.shareConsumer(broker, group, "implicit",
                "share.acquire.mode", "record_limit", "max.poll.records", "7")) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < 50 && System.currentTimeMillis() < deadline) {
                int size = 0;
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                    size++;
                }
                if (size > 0) {
                    sizes.add(size);
                }
            }
            c.commitSync();
        }
        assertEquals(50, got.stream().distinct().count());
        assertEquals(7, sizes.stream().mapToInt(Integer::intValue).max().orElse(0), "poll sizes " + sizes);
    }
}
