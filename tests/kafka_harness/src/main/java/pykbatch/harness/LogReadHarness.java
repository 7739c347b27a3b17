package pykbatch.harness;

import java.io.File;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Optional;

import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.storage.log.FetchIsolation;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.FetchDataInfo;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

/**
 * Opens each partition directory given as a broker does after an unclean shutdown -- Kafka's own
 * UnifiedLog, recovering every segment from offset 0 (a batch that does not validate truncates the
 * log there; indexes rebuilt) -- and prints every record it then serves, from the log start to
 * its end, as JSON lines: {"dir", "offset", "key", "value" (hex or null), "timestamp", "control"},
 * then {"dir", "start", "end"}.  tests/test_partition_truth.py reads repaired partitions with it.
 */
public final class LogReadHarness {
    public static void main(String[] dirs) throws Exception {
        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        BrokerTopicStats stats = new BrokerTopicStats();
        HexFormat hex = HexFormat.of();
        try {
            for (String dir : dirs) {
                try {
                    read(dir, scheduler, stats, hex);
                } catch (Exception e) {  // Kafka refuses the log: said, and the next one read
                    System.out.println("{\"dir\": \"" + dir + "\", \"error\": \""
                        + String.valueOf(e).replace("\\", "/").replace("\"", "'") + "\"}");
                }
            }
        } finally {
            scheduler.shutdown();
        }
    }

    private static void read(String dir, KafkaScheduler scheduler, BrokerTopicStats stats, HexFormat hex)
            throws Exception {
        UnifiedLog log = UnifiedLog.create(new File(dir), new LogConfig(new HashMap<>()), 0L, 0L, scheduler,
            stats, Time.SYSTEM, 900000, new ProducerStateManagerConfig(86400000, false), 600000,
            new LogDirFailureChannel(1), false, Optional.empty());
        try {
            long next = log.logStartOffset(), end = log.logEndOffset();
            while (next < end) {
                FetchDataInfo got = log.read(next, 1 << 20, FetchIsolation.LOG_END, true);
                long before = next;
                for (RecordBatch batch : got.records.batches()) {
                    for (Record r : batch) {
                        if (r.offset() < before) {
                            continue;
                        }
                        System.out.println("{\"dir\": \"" + dir + "\", \"offset\": " + r.offset() + ", \"key\": "
                            + text(hex, r.hasKey() ? r.key() : null) + ", \"value\": "
                            + text(hex, r.hasValue() ? r.value() : null) + ", \"timestamp\": " + r.timestamp()
                            + ", \"control\": " + batch.isControlBatch() + "}");
                    }
                    next = Math.max(next, batch.nextOffset());
                }
                if (next == before) {
                    break;  // nothing served from here: the log's end as Kafka reads it
                }
            }
            System.out.println("{\"dir\": \"" + dir + "\", \"start\": " + log.logStartOffset() + ", \"end\": "
                + log.logEndOffset() + "}");
        } finally {
            log.close();
        }
    }

    private static String text(HexFormat hex, ByteBuffer b) {
        if (b == null) {
            return "null";
        }
        byte[] bytes = new byte[b.remaining()];
        b.duplicate().get(bytes);
        return "\"" + hex.formatHex(bytes) + "\"";
    }
}
