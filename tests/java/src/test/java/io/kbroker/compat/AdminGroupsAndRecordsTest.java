package io.kbroker.compat;

import static io.kbroker.compat.Clients.admin;
import static io.kbroker.compat.Clients.createTopic;
import static io.kbroker.compat.Clients.name;
import static io.kbroker.compat.Clients.produce;
import static io.kbroker.compat.Clients.props;
import static io.kbroker.compat.Clients.shareConsumer;
import static io.kbroker.compat.Clients.shareGroupFromStart;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

/** The Admin client on share groups, group configs, transactions, offsets and DeleteRecords. */
class AdminGroupsAndRecordsTest extends OneBroker {
    @Test
    void aShareGroupIsDescribedWithItsMembersAndItsShareOffsets() throws Exception {
        String topic = name("admin-share");
        createTopic(broker, topic, 1);
        String group = shareGroupFromStart(broker, Map.of());
        produce(broker, topic, 10);
        try (KafkaShareConsumer<String, String> c = shareConsumer(broker, group, "explicit");
             Admin admin = admin(broker)) {
            c.subscribe(List.of(topic));
            int accepted = 0;
            long deadline = System.currentTimeMillis() + 30_000;
            while (accepted < 4 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    c.acknowledge(r, r.offset() < 4 ? AcknowledgeType.ACCEPT : AcknowledgeType.RELEASE);
                    accepted += r.offset() < 4 ? 1 : 0;
                }
                c.commitSync();
            }
            ShareGroupDescription described = admin.describeShareGroups(List.of(group)).all().get().get(group);
            assertEquals(GroupState.STABLE, described.groupState());
            assertEquals(1, described.members().size());
            var offsets = admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(group).get();
            TopicPartition tp = new TopicPartition(topic, 0);
            assertEquals(4L, offsets.get(tp).startOffset(), offsets.toString());
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            var config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            assertEquals("earliest", config.get("share.auto.offset.reset").value());
        }
    }

    @Test
    void transactionsAreListedAndDescribedAndRecordsDeleted() throws Exception {
        String topic = name("admin-txn");
        createTopic(broker, topic, 1);
        String transactionalId = name("txn");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(props(broker, "transactional.id", transactionalId),
                new StringSerializer(), new StringSerializer());
             Admin admin = admin(broker)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "k", "v")).get();
            Set<String> ongoing = admin.listTransactions().all().get().stream()
                .map(TransactionListing::transactionalId).collect(java.util.stream.Collectors.toSet());
            assertTrue(ongoing.contains(transactionalId), ongoing.toString());
            var described = admin.describeTransactions(List.of(transactionalId)).all().get().get(transactionalId);
            assertEquals(Set.of(new TopicPartition(topic, 0)), described.topicPartitions());
            p.commitTransaction();
            for (int i = 0; i < 9; i++) {
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, "k", "v" + i));
                p.commitTransaction();
            }
            TopicPartition tp = new TopicPartition(topic, 0);
            long end = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset();
            assertEquals(20, end);   // ten records and ten commit markers
            admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(6))).all().get();
            long start = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all().get().get(tp).offset();
            assertEquals(6, start);
        }
    }
}
