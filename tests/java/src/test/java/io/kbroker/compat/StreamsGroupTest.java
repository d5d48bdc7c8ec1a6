package io.kbroker.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Kafka Streams on the streams group protocol (KIP-1071, {@code group.protocol=streams}): the broker configures
 * the topology, creates its repartition and changelog topics and assigns active and standby tasks (one standby,
 * a broker-side setting under this protocol); the word count under exactly-once v2 stays exact while instances
 * come and go, and Kafka's Admin lists and describes the group.
 */
class StreamsGroupTest {
    static KBroker broker;

    @BeforeAll
    static void startBroker() throws Exception {
        broker = KBroker.start(Map.of("group.streams.num.standby.replicas", "1",
                                      "group.streams.initial.rebalance.delay.ms", "500"));
    }

    @AfterAll
    static void stopBroker() throws Exception {
        broker.close();
        broker = null;
    }

    @Test
    void wordCountsStayExactOnTheStreamsProtocol() throws Exception {
        WordCount.instancesComeAndGo(broker, "streams", app -> {
            try (Admin admin = Admin.create(Clients.props(broker.bootstrap()))) {
                Clients.waitUntil(() -> stable(admin, app), Duration.ofSeconds(60), app + " stable");
                StreamsGroupDescription group = describe(admin, app);
                assertEquals(4, group.members().size());   // (two instances of two threads each)
                int active = 0, standby = 0;
                for (StreamsGroupMemberDescription m : group.members()) {
                    active += m.assignment().activeTasks().stream().mapToInt(t -> t.partitions().size()).sum();
                    standby += m.assignment().standbyTasks().stream().mapToInt(t -> t.partitions().size()).sum();
                }
                // Three subtopologies of four tasks each; the two counting ones are stateful: one standby each.
                assertEquals(12, active);
                assertEquals(8, standby);
                assertTrue(admin.listGroups().all().get().stream()
                    .anyMatch(g -> g.groupId().equals(app) && g.type().orElse(null) == GroupType.STREAMS));
            }
        });
    }

    private static boolean stable(Admin admin, String app) {
        try {
            return describe(admin, app).groupState() == GroupState.STABLE;
        } catch (Exception e) {
            return false;
        }
    }

    private static StreamsGroupDescription describe(Admin admin, String app) throws Exception {
        return admin.describeStreamsGroups(List.of(app)).all().get().get(app);
    }
}
