package io.kbroker.compat;

import static io.kbroker.compat.Clients.name;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Java client's own OAUTHBEARER login (its unsecured token, OAuthBearerLoginModule's default) against a
 * listener with Kafka's default validator, which requires the scope "kafka".
 */
class OAuthBearerTest {
    static final String MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required";
    static KBroker broker;
    static String oauth;

    @BeforeAll
    static void start() throws Exception {
        broker = KBroker.start(Map.of(
            "listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms", "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
            MODULE + " unsecuredValidatorRequiredScope=\"kafka\";"));
        oauth = broker.listener("SASL_PLAINTEXT");
    }

    @AfterAll
    static void stop() throws Exception {
        broker.close();
    }

    static Properties client(String subject, String scope, Object... more) {
        Properties p = Clients.props(oauth, "security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "OAUTHBEARER",
            "sasl.jaas.config", MODULE + " unsecuredLoginStringClaim_sub=\"" + subject + "\""
                + " unsecuredLoginListClaim_scope=\"," + scope + "\";");
        for (int i = 0; i < more.length; i += 2) {
            p.put(more[i], more[i + 1]);
        }
        return p;
    }

    @Test
    void aTokenWithTheRequiredScopeProducesAndConsumes() throws Exception {
        String topic = name("oauth");
        Clients.createTopic(broker, topic, 1);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(client("alice", "kafka", "acks", "all"),
                new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, String.valueOf(i))).get();
            }
        }
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(client("alice", "kafka",
                "group.id", name("g"), "auto.offset.reset", "earliest"), new StringDeserializer(),
                new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            Clients.waitUntil(() -> {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                }
                return got.size() >= 10;
            }, Duration.ofSeconds(30), "10 records");
        }
        assertEquals(List.of("0", "1", "2", "3", "4", "5", "6", "7", "8", "9"), got);
    }

    @Test
    void aTokenWithoutItIsRefusedInKafkasWords() {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(client("mallory", "other",
                "max.block.ms", "10000"), new StringSerializer(), new StringSerializer())) {
            ExecutionException failed = assertThrows(ExecutionException.class,
                () -> producer.send(new ProducerRecord<>(name("never"), "x")).get());
            assertTrue(failed.getCause() instanceof SaslAuthenticationException, failed.getCause().toString());
            String words = failed.getCause().getMessage();
            assertTrue(words.contains("{\"status\":\"insufficient_scope\", \"scope\":\"[kafka]\"}"), words);
        }
    }
}
