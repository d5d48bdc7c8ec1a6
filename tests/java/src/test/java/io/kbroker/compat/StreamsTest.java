package io.kbroker.compat;

import org.junit.jupiter.api.Test;

/**
 * Kafka Streams (the classic group protocol, Streams' default) under exactly-once v2: its internal topics,
 * transactions, standby tasks and restores from changelogs, on one kbroker. The streams group protocol
 * (KIP-1071) runs the same scenario in StreamsGroupTest.
 */
class StreamsTest extends OneBroker {
    @Test
    void wordCountsStayExactWhileInstancesComeAndGo() throws Exception {
        WordCount.instancesComeAndGo(broker, "classic", app -> { });
    }
}
