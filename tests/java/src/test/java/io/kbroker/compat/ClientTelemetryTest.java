package io.kbroker.compat;

import static io.kbroker.compat.Clients.admin;
import static io.kbroker.compat.Clients.createTopic;
import static io.kbroker.compat.Clients.name;
import static io.kbroker.compat.Clients.props;
import static io.kbroker.compat.Clients.waitUntil;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

/** KIP-714 client telemetry from the Java client: its own metrics, pushed to kbroker, served on /metrics. */
class ClientTelemetryTest {
    @Test
    void theJavaProducerPushesItsMetricsUnderASubscription() throws Exception {
        try (KBroker broker = KBroker.start(Map.of("metrics.port", "0"))) {
            int metricsPort = broker.metricsPort();
            String topic = name("telemetry");
            createTopic(broker, topic, 1);
            String clientId = name("java-telemetry");
            try (Admin admin = admin(broker)) {
                ConfigResource subscription = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, name("all"));
                admin.incrementalAlterConfigs(Map.of(subscription, List.of(
                    new AlterConfigOp(new ConfigEntry("metrics", "org.apache.kafka.producer."), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("interval.ms", "200"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("match", "client_id=" + clientId), AlterConfigOp.OpType.SET))))
                    .all().get();
            }
            HttpClient http = HttpClient.newHttpClient();
            HttpRequest scrape = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + metricsPort + "/metrics")).build();
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(props(broker, "client.id", clientId),
                    new StringSerializer(), new StringSerializer())) {
                producer.send(new ProducerRecord<>(topic, "k", "v")).get();
                waitUntil(() -> {
                    String text;
                    try {
                        text = http.send(scrape, HttpResponse.BodyHandlers.ofString()).body();
                    } catch (Exception e) {
                        return false;
                    }
                    return text.lines().anyMatch(l -> l.startsWith("org_apache_kafka_producer_")
                        && l.contains("client_id=\"" + clientId + "\"")
                        && l.contains("client_software_name=\"apache-kafka-java\""));
                }, Duration.ofSeconds(30), "the producer's metrics on /metrics");
            }
        }
    }
}
