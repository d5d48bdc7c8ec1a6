package io.kbroker.compat;

import static io.kbroker.compat.Clients.createTopic;
import static io.kbroker.compat.Clients.name;

import java.util.Map;

import org.junit.jupiter.api.Test;

/**
 * Kafka Streams (the classic group protocol, Streams' default) under exactly-once v2: its internal topics,
 * transactions, standby tasks and restores from changelogs, on one kbroker. A Streams application that asks
 * for the streams group protocol (KIP-1071) is not served: docs/COMPATIBILITY.md says what it sees.
 */
class StreamsTest extends OneBroker {
    @Test
    void wordCountsStayExactWhileInstancesComeAndGo() throws Exception {
        String in = name("words"), out = name("counts"), windowed = name("hourly"), app = name("wc");
        for (String topic : new String[] {in, out, windowed}) {
            createTopic(broker, topic, 4);
        }
        String bootstrap = broker.bootstrap();
        int step = 20 * WordCount.WORDS;
        try (WordCount first = new WordCount(bootstrap, app, in, out, windowed, 1);
             WordCount second = new WordCount(bootstrap, app, in, out, windowed, 1)) {
            WordCount.send(bootstrap, in, 0, step);
            WordCount.awaitCounts(bootstrap, out, 20);
            // The first instance leaves: its tasks move to the second, which had them as standbys or
            // restores them from their changelogs.
            first.close();
            WordCount.send(bootstrap, in, step, 2 * step);
            WordCount.awaitCounts(bootstrap, out, 40);
            // A third instance with an empty state directory joins, and the second leaves after it.
            try (WordCount third = new WordCount(bootstrap, app, in, out, windowed, 1)) {
                second.close();
                WordCount.send(bootstrap, in, 2 * step, 3 * step);
                WordCount.awaitCounts(bootstrap, out, 60);
                WordCount.awaitCounts(bootstrap, windowed, 60);
            }
        }
        WordCount.assertNoCountPast(bootstrap, out, 60);
        WordCount.assertNoCountPast(bootstrap, windowed, 60);
    }
}
