package io.kbroker.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Small helpers the tests share: names, an admin client, topics, records, waiting on a condition. */
final class Clients {
    private Clients() {
    }

    static String name(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Admin admin(KBroker broker) {
        return Admin.create(Map.of("bootstrap.servers", broker.bootstrap()));
    }

    static void createTopic(KBroker broker, String topic, int partitions) throws Exception {
        try (Admin admin = admin(broker)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        }
    }

    /** A share consumer of Strings in {@code group}, acknowledging in {@code mode} (implicit or explicit), with
     * more properties if given. */
    static KafkaShareConsumer<String, String> shareConsumer(KBroker broker, String group, String mode,
                                                          Object... more) {
        Properties p = props(broker, "group.id", group, "share.acknowledgement.mode", mode);
        for (int i = 0; i < more.length; i += 2) {
            p.put(more[i], more[i + 1]);
        }
        return new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static Properties props(KBroker broker, Object... keyValues) {
        return props(broker.bootstrap(), keyValues);
    }

    static Properties props(String bootstrap, Object... keyValues) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        for (int i = 0; i < keyValues.length; i += 2) {
            p.put(keyValues[i], keyValues[i + 1]);
        }
        return p;
    }

    /** ``count`` records "0".."count-1" (keys and values), spread over the partitions by key; returns them. */
    static List<String> produce(KBroker broker, String topic, int count) throws Exception {
        List<String> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props(broker, "enable.idempotence", "true",
                "acks", "all"), new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, String.valueOf(i), String.valueOf(i))).get();
                sent.add(String.valueOf(i));
            }
        }
        return sent;
    }

    /** A new share group that reads its topics from their start (share.auto.offset.reset=earliest), with more
     * group configs if given. */
    static String shareGroupFromStart(KBroker broker, Map<String, String> configs) throws Exception {
        String group = name("s");
        Map<String, String> all = new HashMap<>(configs);
        all.put("share.auto.offset.reset", "earliest");
        setGroupConfigs(broker, group, all);
        return group;
    }

    static void setGroupConfigs(KBroker broker, String group, Map<String, String> configs) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        Collection<AlterConfigOp> ops = new ArrayList<>();
        configs.forEach((k, v) -> ops.add(new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
        try (Admin admin = admin(broker)) {
            admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
        }
    }

    static void waitUntil(BooleanSupplier condition, Duration timeout, String what) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(20);
        }
    }
}
