package io.kbroker.compat;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * A test class's own kbroker with the test settings: started before its first test and stopped after its
 * last. Surefire runs the classes one after another, so the one field serves each in turn.
 */
abstract class OneBroker {
    static KBroker broker;

    @BeforeAll
    static void startBroker() throws Exception {
        broker = KBroker.start();
    }

    @AfterAll
    static void stopBroker() throws Exception {
        broker.close();
        broker = null;
    }
}
