package pykbatch.harness;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;

import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.requests.ProduceRequest;
import org.apache.kafka.common.requests.ProduceResponse.RecordError;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.AppendOrigin;
import org.apache.kafka.storage.internals.log.LogAppendInfo;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.RecordValidationException;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

/**
 * Appends byte buffers to a real Kafka partition log, as a partition leader does for a produce
 * request, and prints what the ProduceResponse would carry for each append.
 *
 * <p>Input (stdin), one command per line:
 * <pre>
 *   CASE id                 a fresh, empty partition "t-0"
 *   SET key value           a topic config (LogConfig name), or harness.now / harness.origin /
 *                           harness.produce.version / harness.leader.epoch
 *   APPEND hex              one partition's records of a produce request
 *   END                     closes the partition
 * </pre>
 * Output (stdout): one JSON object per APPEND.  The exception to response mapping is
 * ReplicaManager's: a RecordValidationException gives the inner exception's code, its message
 * as error_message and the record errors; any other exception gives Errors.forException and no
 * error_message.
 */
public final class BrokerHarness {

    /** A clock that stands still at the case's "now", so timestamp windows are reproducible. */
    static final class FixedTime implements Time {
        final long now;
        FixedTime(long now) { this.now = now; }
        @Override public long milliseconds() { return now; }
        @Override public long nanoseconds() { return System.nanoTime(); }
        @Override public void sleep(long ms) { }
        @Override public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) { }
    }

    private final PrintStream out;
    private final KafkaScheduler scheduler = new KafkaScheduler(1);
    private final BrokerTopicStats stats = new BrokerTopicStats();

    private String caseId;
    private final Map<String, String> settings = new HashMap<>();
    private File dir;
    private UnifiedLog log;
    private int appendIndex;

    BrokerHarness(PrintStream out) {
        this.out = out;
        scheduler.startup();
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        BrokerHarness harness = new BrokerHarness(out);
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                harness.command(line);
            }
        }
        harness.closeLog();
        harness.scheduler.shutdown();
    }

    void command(String line) throws Exception {
        String[] parts = line.split(" ", 3);
        switch (parts[0]) {
            case "CASE":
                closeLog();
                caseId = parts[1];
                settings.clear();
                appendIndex = 0;
                break;
            case "SET":
                settings.put(parts[1], parts[2]);
                break;
            case "APPEND":
                append(parts.length > 1 ? HexFormat.of().parseHex(parts[1]) : new byte[0]);
                break;
            case "END":
                closeLog();
                out.println("{\"end\": " + quote(caseId) + "}");
                break;
            default:
                throw new IllegalArgumentException("unknown command: " + line);
        }
    }

    private void openLog() throws IOException {
        dir = Files.createTempDirectory("pykbatch-harness").toFile();
        File partitionDir = new File(dir, "t-0");
        Map<String, Object> props = new HashMap<>();
        for (Map.Entry<String, String> e : settings.entrySet()) {
            if (!e.getKey().startsWith("harness.")) {
                props.put(e.getKey(), e.getValue());
            }
        }
        long now = Long.parseLong(settings.getOrDefault("harness.now", "1700000000000"));
        log = UnifiedLog.create(partitionDir, new LogConfig(props), 0L, 0L, scheduler, stats, new FixedTime(now),
                900000, new ProducerStateManagerConfig(86400000, false), 600000,
                new LogDirFailureChannel(1), true, Optional.empty());
    }

    private void closeLog() throws IOException {
        if (log != null) {
            log.close();
            log = null;
        }
        if (dir != null) {
            deleteTree(dir);
            dir = null;
        }
    }

    private static void deleteTree(File f) {
        File[] children = f.listFiles();
        if (children != null) {
            for (File c : children) {
                deleteTree(c);
            }
        }
        f.delete();
    }

    private void append(byte[] bytes) throws IOException {
        if (log == null) {
            openLog();
        }
        MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(bytes));
        int leaderEpoch = Integer.parseInt(settings.getOrDefault("harness.leader.epoch", "7"));
        AppendOrigin origin = AppendOrigin.valueOf(settings.getOrDefault("harness.origin", "CLIENT"));
        StringBuilder json = new StringBuilder("{\"case\": ").append(quote(caseId))
            .append(", \"append\": ").append(appendIndex++);
        try {
            String version = settings.get("harness.produce.version");
            if (version != null) {
                ProduceRequest.validateRecords(Short.parseShort(version), records);
            }
            LogAppendInfo info = log.appendAsLeader(records, leaderEpoch, origin);
            json.append(", \"errorCode\": 0, \"firstOffset\": ").append(info.firstOffset())
                .append(", \"lastOffset\": ").append(info.lastOffset())
                .append(", \"logAppendTime\": ").append(info.logAppendTime());
        } catch (RecordValidationException e) {
            Errors error = Errors.forException(e.invalidException());
            json.append(", \"errorCode\": ").append(error.code())
                .append(", \"errorName\": ").append(quote(error.name()))
                .append(", \"exceptionClass\": ").append(quote(e.invalidException().getClass().getName()))
                .append(", \"errorMessage\": ").append(quote(e.invalidException().getMessage()))
                .append(", \"recordErrors\": [");
            List<String> items = new ArrayList<>();
            for (RecordError r : e.recordErrors()) {
                items.add("[" + r.batchIndex + ", " + quote(r.message) + "]");
            }
            json.append(String.join(", ", items)).append("]");
        } catch (Exception e) {
            Errors error = Errors.forException(e);
            json.append(", \"errorCode\": ").append(error.code())
                .append(", \"errorName\": ").append(quote(error.name()))
                .append(", \"exceptionClass\": ").append(quote(e.getClass().getName()))
                .append(", \"exceptionMessage\": ").append(quote(e.getMessage()))
                .append(", \"errorMessage\": null, \"recordErrors\": []");
        }
        out.println(json.append("}"));
    }

    static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (ch < 0x20) {
                        b.append(String.format("\\u%04x", (int) ch));
                    } else {
                        b.append(ch);
                    }
            }
        }
        return b.append('"').toString();
    }
}
