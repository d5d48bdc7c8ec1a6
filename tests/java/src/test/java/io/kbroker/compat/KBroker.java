package io.kbroker.compat;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * One kbroker process on 127.0.0.1 and a port of its own choosing (0), as the Python tests start it:
 * {@code python -m kbroker.broker.cli serve --override ...} from the repository root, its data in a temporary
 * directory, its log in that directory's broker.log. {@link #close()} stops it with SIGTERM and waits.
 */
public final class KBroker implements AutoCloseable {
    /** The settings the Python tests give a broker of their own: one replica of everything, short timings. */
    static final Map<String, String> TEST_SETTINGS = Map.ofEntries(
        Map.entry("offsets.topic.replication.factor", "1"),
        Map.entry("transaction.state.log.replication.factor", "1"),
        Map.entry("transaction.state.log.min.isr", "1"),
        Map.entry("share.coordinator.state.topic.replication.factor", "1"),
        Map.entry("share.coordinator.state.topic.min.isr", "1"),
        Map.entry("group.initial.rebalance.delay.ms", "0"),
        Map.entry("group.consumer.heartbeat.interval.ms", "500"),
        Map.entry("group.consumer.min.heartbeat.interval.ms", "100"),
        Map.entry("group.share.heartbeat.interval.ms", "500"),
        Map.entry("group.share.min.heartbeat.interval.ms", "100"),
        Map.entry("group.share.min.record.lock.duration.ms", "1000"),
        Map.entry("num.partitions", "1"));

    private final Process process;
    private final Path dir;
    private final String bootstrap;
    private final Map<String, String> listeners;
    private final int metricsPort;

    private KBroker(Process process, Path dir, String bootstrap, Map<String, String> listeners, int metricsPort) {
        this.process = process;
        this.dir = dir;
        this.bootstrap = bootstrap;
        this.listeners = listeners;
        this.metricsPort = metricsPort;
    }

    public static KBroker start() throws IOException, InterruptedException {
        return start(Map.of());
    }

    public static KBroker start(Map<String, String> overrides) throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("kbroker-java");
        Map<String, String> settings = new LinkedHashMap<>(TEST_SETTINGS);
        settings.put("log.dirs", dir.resolve("data").toString());
        settings.put("listeners", "PLAINTEXT://127.0.0.1:0");
        settings.putAll(overrides);
        List<String> command = new ArrayList<>(List.of(
            System.getProperty("kbroker.python", "python3"), "-m", "kbroker.broker.cli", "serve",
            "--log-level", System.getProperty("kbroker.log.level", "WARNING")));
        settings.forEach((k, v) -> command.addAll(List.of("--override", k + "=" + v)));
        ProcessBuilder builder = new ProcessBuilder(command)
            .directory(new File(System.getProperty("kbroker.root", "../..")))
            .redirectError(dir.resolve("broker.log").toFile());
        builder.environment().put("PYTHONUNBUFFERED", "1");
        Process process = builder.start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        String line;
        Map<String, String> listeners = new LinkedHashMap<>();
        int metricsPort = -1;
        // Every port is the broker's own choosing (0) and read from what it prints once bound: a port probed
        // free beforehand may be taken by another process before the broker binds it.
        while (System.nanoTime() < deadline && (line = out.readLine()) != null) {
            String last = line.substring(line.lastIndexOf(' ') + 1);
            if (line.startsWith("kbroker listener ")) {
                listeners.put(line.split(" ")[2], last);
            } else if (line.startsWith("kbroker metrics on port ")) {
                metricsPort = Integer.parseInt(last);
            } else if (line.startsWith("kbroker listening on")) {
                return new KBroker(process, dir, last, listeners, metricsPort);
            }
        }
        process.destroyForcibly();
        throw new IOException("kbroker did not start: " + Files.readString(dir.resolve("broker.log")));
    }

    public String bootstrap() {
        return bootstrap;
    }

    /** Where the listener named {@code name} (SASL_PLAINTEXT, ...) listens: host:port. */
    public String listener(String name) {
        return listeners.get(name);
    }

    /** The metrics endpoint's port (-1 without one). */
    public int metricsPort() {
        return metricsPort;
    }

    public String log() throws IOException {
        return Files.readString(dir.resolve("broker.log"));
    }

    @Override
    public void close() throws InterruptedException, IOException {
        process.destroy();   // SIGTERM: the broker finishes its work and exits 0
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor();
        }
        removeIfClean(process, dir);
    }

    /**
     * The temporary directory removed once its process exited 0; kept otherwise, named on stderr, so that a
     * failure's logs are there to read (a run of the suite otherwise leaves its directories in /tmp).
     */
    static void removeIfClean(Process process, Path dir) throws IOException {
        if (process.exitValue() != 0) {
            System.err.println("kept for its logs: " + dir + " (exit " + process.exitValue() + ")");
            return;
        }
        removeTree(dir);
    }

    /** {@code dir} and everything under it removed, if it is there. */
    static void removeTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path path : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(path);
            }
        }
    }
}
