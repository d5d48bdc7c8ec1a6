package io.kbroker.compat;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.io.File;

/**
 * ZooKeeper and three kbroker brokers (ids 1-3), started by {@code python -m tests.cluster_service} as the
 * Python cluster tests start them; {@link #kill(int)} is kill -9 of one broker, {@link #start(int)} brings it
 * back on its port and data.
 */
public final class KCluster implements AutoCloseable {
    private final Process process;
    private final BufferedReader out;
    private final PrintWriter in;
    private final String bootstrap;
    private final Path dir;

    private KCluster(Process process, Path dir, BufferedReader out, PrintWriter in, String bootstrap) {
        this.process = process;
        this.dir = dir;
        this.out = out;
        this.in = in;
        this.bootstrap = bootstrap;
    }

    public static KCluster start() throws IOException {
        Path dir = Files.createTempDirectory("kbroker-java-cluster");
        ProcessBuilder builder = new ProcessBuilder(System.getProperty("kbroker.python", "python3"), "-m",
                "tests.cluster_service", dir.toString())
            .directory(new File(System.getProperty("kbroker.root", "../..")))
            .redirectError(dir.resolve("service.log").toFile());
        builder.environment().put("PYTHONUNBUFFERED", "1");
        Process process = builder.start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        PrintWriter in = new PrintWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8), true);
        String line = out.readLine();
        if (line == null || !line.startsWith("cluster bootstrap ")) {
            process.destroyForcibly();
            throw new IOException("the cluster did not start: " + Files.readString(dir.resolve("service.log")));
        }
        return new KCluster(process, dir, out, in, line.substring("cluster bootstrap ".length()));
    }

    public String bootstrap() {
        return bootstrap;
    }

    private void command(String line) throws IOException {
        in.println(line);
        String answer = out.readLine();
        if (!"ok".equals(answer)) {
            throw new IOException(line + ": " + answer);
        }
    }

    public void kill(int brokerId) throws IOException {
        command("kill " + brokerId);
    }

    public void start(int brokerId) throws IOException {
        command("start " + brokerId);
    }

    @Override
    public void close() throws Exception {
        in.println("stop");
        in.close();
        if (!process.waitFor(60, java.util.concurrent.TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor();
        }
        KBroker.removeIfClean(process, dir);
    }
}
