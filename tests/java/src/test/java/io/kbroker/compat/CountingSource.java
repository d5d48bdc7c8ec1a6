package io.kbroker.compat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/** A source connector of the numbers 0 to count - 1, as strings, into one topic, resuming where its offsets say. */
public class CountingSource extends SourceConnector {
    private Map<String, String> config;

    @Override
    public void start(Map<String, String> props) {
        config = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return CountingTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(config);
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef();
    }

    @Override
    public String version() {
        return "1";
    }

    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> props) {
        return ExactlyOnceSupport.SUPPORTED;
    }

    public static class CountingTask extends SourceTask {
        static final Map<String, String> PARTITION = Map.of("source", "counting");
        private String topic;
        private long next;
        private long count;

        @Override
        public void start(Map<String, String> props) {
            topic = props.get("topic");
            count = Long.parseLong(props.get("count"));
            Map<String, Object> offset = context.offsetStorageReader().offset(PARTITION);
            next = offset == null ? 0 : ((Number) offset.get("next")).longValue();
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            if (next >= count) {
                Thread.sleep(50);
                return null;
            }
            Thread.sleep(20);   // (about 3 s for 3,000: a test has time to kill the worker mid-stream)
            List<SourceRecord> records = new ArrayList<>();
            for (int i = 0; i < 20 && next < count; i++, next++) {
                records.add(new SourceRecord(PARTITION, Map.of("next", next + 1), topic, null, null, null,
                    null, String.valueOf(next)));
            }
            return records;
        }

        @Override
        public void stop() {
        }

        @Override
        public String version() {
            return "1";
        }
    }
}
