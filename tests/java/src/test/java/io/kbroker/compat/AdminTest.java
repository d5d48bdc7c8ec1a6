package io.kbroker.compat;

import static io.kbroker.compat.Clients.admin;
import static io.kbroker.compat.Clients.createTopic;
import static io.kbroker.compat.Clients.name;
import static io.kbroker.compat.Clients.props;
import static io.kbroker.compat.Clients.waitUntil;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/** The Admin client: topics, partitions, configs, the groups of every type, and quotas: an IP address's
 * connection rate (KIP-612) and a client id's controller mutation rate (KIP-599), which the Admin meets by
 * retrying once the throttle time has passed. */
class AdminTest extends OneBroker {
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

    @Test
    void anAddressQuotaIsSetAndDescribed() throws Exception {
        ClientQuotaEntity address = new ClientQuotaEntity(Map.of(ClientQuotaEntity.IP, "10.9.8.7"));
        try (Admin admin = admin(broker)) {
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(address,
                List.of(new ClientQuotaAlteration.Op("connection_creation_rate", 5.0))))).all().get();
            var found = admin.describeClientQuotas(ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.IP, "10.9.8.7")))).entities().get();
            assertEquals(Map.of(address, Map.of("connection_creation_rate", 5.0)), found);
            var mixed = admin.alterClientQuotas(List.of(new ClientQuotaAlteration(
                new ClientQuotaEntity(Map.of(ClientQuotaEntity.IP, "10.9.8.7", ClientQuotaEntity.USER, "alice")),
                List.of(new ClientQuotaAlteration.Op("connection_creation_rate", 5.0))))).all();
            assertInstanceOf(InvalidRequestException.class,
                assertThrows(ExecutionException.class, mixed::get).getCause());
        }
    }

    @Test
    void aClientOverItsMutationRateIsRefusedThenServedOnRetry() throws Exception {
        String client = name("mutator");
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, client));
        try (Admin admin = admin(broker)) {
            // 5 partitions a second, a bucket of 55: 60 partitions leave it a second in debt
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                List.of(new ClientQuotaAlteration.Op("controller_mutation_rate", 5.0))))).all().get();
        }
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", broker.bootstrap(), "client.id", client))) {
            admin.createTopics(List.of(new NewTopic(name("many"), 60, (short) 1))).all().get();
            var refused = admin.createTopics(List.of(new NewTopic(name("refused"), 1, (short) 1)),
                new CreateTopicsOptions().retryOnQuotaViolation(false)).all();
            Throwable cause = assertThrows(ExecutionException.class, refused::get).getCause();
            var throttled = assertInstanceOf(ThrottlingQuotaExceededException.class, cause);
            assertTrue(throttled.throttleTimeMs() > 0 && throttled.throttleTimeMs() <= 1_000,
                "throttle " + throttled.throttleTimeMs());
            long began = System.nanoTime();
            String retried = name("retried");
            admin.createTopics(List.of(new NewTopic(retried, 1, (short) 1))).all().get();   // retried until it fits
            assertTrue(admin.listTopics().names().get().contains(retried));
            assertTrue(System.nanoTime() - began < 30_000_000_000L);
        }
    }
}
