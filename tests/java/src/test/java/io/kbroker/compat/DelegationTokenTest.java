package io.kbroker.compat;

import static io.kbroker.compat.Clients.name;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.DelegationTokenDisabledException;
import org.apache.kafka.common.errors.UnsupportedByAuthenticationException;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Delegation tokens (KIP-48) through Kafka's Admin client: alice creates one, describes and renews it, and a
 * producer logs in with it (SCRAM with tokenauth) and writes as alice; on a broker without
 * delegation.token.secret.key the Admin client is told tokens are disabled.
 */
class DelegationTokenTest {
    static final String PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required";
    static final String SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required";
    static KBroker broker;
    static String sasl;

    @BeforeAll
    static void start() throws Exception {
        broker = KBroker.start(Map.of(
            "listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN + " user_alice=\"alice-secret\";",
            "delegation.token.secret.key", "the-brokers-shared-secret"));
        sasl = broker.listener("SASL_PLAINTEXT");
    }

    @AfterAll
    static void stop() throws Exception {
        broker.close();
    }

    static Properties asAlice() {
        return Clients.props(sasl, "security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN",
            "sasl.jaas.config", PLAIN + " username=\"alice\" password=\"alice-secret\";");
    }

    @Test
    void aTokenIsCreatedDescribedRenewedAndLogsAProducerInAsItsOwner() throws Exception {
        String topic = name("token");
        DelegationToken token;
        try (Admin admin = Admin.create(asAlice())) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            token = admin.createDelegationToken(new CreateDelegationTokenOptions()
                .renewers(List.of(new KafkaPrincipal("User", "bob")))).delegationToken().get();
            assertEquals("alice", token.tokenInfo().owner().getName());
            List<DelegationToken> described = admin.describeDelegationToken().delegationTokens().get();
            assertTrue(described.stream().anyMatch(t -> t.tokenInfo().tokenId().equals(token.tokenInfo().tokenId())));
            long expiry = admin.renewDelegationToken(token.hmac()).expiryTimestamp().get();
            assertTrue(expiry > token.tokenInfo().issueTimestamp(), "renewed to " + expiry);
        }
        Properties p = Clients.props(sasl, "security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "SCRAM-SHA-256",
            "sasl.jaas.config", SCRAM + " username=\"" + token.tokenInfo().tokenId() + "\" password=\""
                + Base64.getEncoder().encodeToString(token.hmac()) + "\" tokenauth=\"true\";");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(),
                new StringSerializer())) {
            producer.send(new ProducerRecord<>(topic, "with a token")).get();
        }
        // A client logged in with a token gets no token (Kafka hands tokens only to those it authenticated
        // otherwise): the Admin client hears DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.
        try (Admin onToken = Admin.create(p)) {
            ExecutionException refused = assertThrows(ExecutionException.class,
                () -> onToken.createDelegationToken().delegationToken().get());
            assertTrue(refused.getCause() instanceof UnsupportedByAuthenticationException,
                refused.getCause().toString());
        }
    }

    @Test
    void aBrokerWithoutTheSecretKeyTellsTheAdminClientTokensAreDisabled() throws Exception {
        try (KBroker plain = KBroker.start(Map.of(
                "listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms", "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN + " user_alice=\"alice-secret\";"))) {
            Properties p = asAlice();
            p.put("bootstrap.servers", plain.listener("SASL_PLAINTEXT"));
            try (Admin admin = Admin.create(p)) {
                ExecutionException failed = assertThrows(ExecutionException.class,
                    () -> admin.createDelegationToken().delegationToken().get());
                assertTrue(failed.getCause() instanceof DelegationTokenDisabledException, failed.getCause().toString());
            }
        }
    }
}
