package io.kbroker.compat;

import static io.kbroker.compat.Clients.admin;
import static io.kbroker.compat.Clients.createTopic;
import static io.kbroker.compat.Clients.name;
import static io.kbroker.compat.Clients.props;
import static io.kbroker.compat.Clients.waitUntil;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The Admin client: topics, partitions, configs, and the groups of every type. */
class AdminTest {
    static KBroker broker;

    @BeforeAll
    static void start() throws Exception {
        broker = KBroker.start();
    }

    @AfterAll
    static void stop() throws Exception {
        broker.close();
    }

    @Test
    void topicsPartitionsAndConfigs() throws Exception {
        String topic = name("admin");
        createTopic(broker, topic, 2);
        try (Admin admin = admin(broker)) {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            assertEquals(3, described.partitions().size());
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            var config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            assertEquals("delete", config.get("cleanup.policy").value());
            admin.deleteTopics(List.of(topic)).all().get();
            waitUntil(() -> {
                try {
                    return !admin.listTopics().names().get().contains(topic);
                } catch (Exception e) {
                    return false;
                }
            }, Duration.ofSeconds(30), "the topic gone");
        }
    }

    @Test
    void aConsumerGroupOfTheNewProtocolIsListedAndDescribedWithItsType() throws Exception {
        String topic = name("admin-groups");
        createTopic(broker, topic, 2);
        String group = name("g");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props(broker, "group.id", group,
                "group.protocol", "consumer"), new StringDeserializer(), new StringDeserializer());
             Admin admin = admin(broker)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30_000;
            while (c.assignment().size() < 2 && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(50));
            }
            Set<String> consumerGroups = admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get().stream()
                .filter(g -> g.type().orElse(null) == GroupType.CONSUMER)
                .map(GroupListing::groupId).collect(Collectors.toSet());
            assertTrue(consumerGroups.contains(group), consumerGroups.toString());
            ConsumerGroupDescription described = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            assertEquals(GroupType.CONSUMER, described.type());
            assertEquals(1, described.members().size());
            assertEquals(2, described.members().iterator().next().assignment().topicPartitions().size());
        }
    }
}
