package io.kbroker.compat;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/**
 * A Kafka Connect distributed worker in a JVM of its own (so that a test can kill it with SIGKILL): this
 * class's main starts one with exactly-once source support and prints its REST address; {@link #start}
 * runs that main on the test's class path and waits for the address.
 */
final class ConnectWorker implements AutoCloseable {
    private final Process process;
    private final String rest;

    private ConnectWorker(Process process, String rest) {
        this.process = process;
        this.rest = rest;
    }

    /** The worker properties of a Connect cluster named {@code group} on {@code bootstrap}. */
    static Map<String, String> settings(String bootstrap, String group) {
        Map<String, String> p = new TreeMap<>();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.put("config.storage.topic", group + "-configs");
        p.put("offset.storage.topic", group + "-offsets");
        p.put("status.storage.topic", group + "-status");
        p.put("config.storage.replication.factor", "1");
        p.put("offset.storage.replication.factor", "1");
        p.put("status.storage.replication.factor", "1");
        p.put("listeners", "http://127.0.0.1:0");
        p.put("exactly.once.source.support", "enabled");
        p.put("offset.flush.interval.ms", "200");
        p.put("plugin.discovery", "only_scan");
        return p;
    }

    static ConnectWorker start(String bootstrap, String group, Path log) throws IOException {
        List<String> command = new ArrayList<>(List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp",
            System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")),
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", ConnectWorker.class.getName(), bootstrap, group));
        Process process = new ProcessBuilder(command).redirectError(log.toFile()).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();   // (the worker's first line, or null once it died)
        if (line == null || !line.startsWith("rest ")) {
            process.destroyForcibly();
            throw new IOException("the Connect worker did not start; its log is " + log);
        }
        return new ConnectWorker(process, line.substring("rest ".length()));
    }

    String rest() {
        return rest;
    }

    /** SIGKILL: the worker stops where it is, an open transaction and unflushed offsets left behind. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor();
    }

    @Override
    public void close() throws InterruptedException {
        process.destroy();   // SIGTERM: Connect's shutdown hook stops the worker cleanly
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            kill();
        }
    }

    public static void main(String[] args) throws Exception {
        Connect<?> connect = new ConnectDistributed().startConnect(settings(args[0], args[1]));
        System.out.println("rest " + connect.rest().serverUrl());
        System.out.flush();
        connect.awaitStop();
    }
}
