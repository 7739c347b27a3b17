package io.pykbatch.spark;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * kbatch_validate's options (a SQL map of strings, as the Python functions take them) as the core's
 * options.  The fields, their defaults and the names they accept come from pykbatch's
 * ValidationConfig, written into the jar when it is built (validation.properties): one list of
 * options for both paths.
 */
final class Options {
    static final Properties DEFAULTS = load();
    static final List<String> KEYS = Arrays.asList(DEFAULTS.getProperty("keys").split(","));
    private static final long LONG_MAX = Long.MAX_VALUE;

    final Map<String, String> values;
    final long[] core = new long[16];  // kb_jni.c's OPT_* order
    final byte[] topicPartition;
    final boolean nowFixed;
    final boolean mayRebuild;    // a client's append with size limits: the broker's rebuilt batch is sized too
    final boolean alwaysRebuilt; // the topic re-encodes every batch

    private static Properties load() {
        Properties p = new Properties();
        try (java.io.InputStream in = Options.class.getResourceAsStream("validation.properties")) {
            p.load(in);
        } catch (Exception e) {
            throw new IllegalStateException("pykbatch's jar lacks validation.properties: rebuild it", e);
        }
        return p;
    }

    Options(Map<String, String> given) {
        Map<String, String> v = new HashMap<>();
        for (String key : KEYS) {
            v.put(key, DEFAULTS.getProperty("default." + key));
        }
        for (Map.Entry<String, String> e : given.entrySet()) {
            if (!KEYS.contains(e.getKey())) {
                throw new IllegalArgumentException("unknown kbatch_validate option '" + e.getKey()
                    + "'; expected one of " + KEYS);
            }
            v.put(e.getKey(), e.getValue());
        }
        values = v;
        String origin = v.get("origin");
        if (!Arrays.asList(DEFAULTS.getProperty("origins").split(",")).contains(origin)) {
            throw new IllegalArgumentException("origin must be one of " + DEFAULTS.getProperty("origins") + ", not '"
                + origin + "'");
        }
        String timestampType = v.get("timestamp_type");
        if (!Arrays.asList(DEFAULTS.getProperty("timestamp_types").split(",")).contains(timestampType)) {
            throw new IllegalArgumentException("timestamp_type must be one of "
                + DEFAULTS.getProperty("timestamp_types") + ", not '" + timestampType + "'");
        }
        Long maxMessage = number(v, "max_message_bytes");
        Long segment = number(v, "segment_bytes");
        String compression = v.get("target_compression");
        long targetMagic = number(v, "target_magic");
        Long produceVersion = number(v, "produce_version");
        boolean client = origin.equals("client");
        mayRebuild = client && (maxMessage != null || segment != null);
        alwaysRebuilt = !compression.equals("producer") || targetMagic < 2;
        // timestamp_window: the deprecated difference setting stands in for a limit left at its default
        long before = number(v, "timestamp_before_max_ms");
        long after = number(v, "timestamp_after_max_ms");
        Long diff = number(v, "timestamp_difference_max_ms");
        long kafka4After = Long.parseLong(DEFAULTS.getProperty("default.timestamp_after_max_ms"));
        if (diff != null) {
            before = before == LONG_MAX ? diff : before;
            after = after == LONG_MAX || after == kafka4After ? diff : after;
        }
        Long now = number(v, "now_ms");
        nowFixed = now != null;
        core[0] = client ? 0 : 1;
        core[1] = flag(v, "verify_crc") ? 1 : 0;
        core[2] = flag(v, "strict") ? 1 : 0;
        core[3] = flag(v, "compacted") ? 1 : 0;
        core[4] = timestampType.equals(DEFAULTS.getProperty("log_append_time")) ? 1 : 0;
        core[5] = now != null ? now : System.currentTimeMillis();
        core[6] = before;
        core[7] = after;
        core[8] = maxMessage == null ? -1 : maxMessage;
        core[9] = segment == null || (mayRebuild && alwaysRebuilt) ? -1 : segment;
        core[10] = targetMagic;
        core[11] = codecId(compression);
        core[12] = flag(v, "single_append") || (produceVersion != null && produceVersion != 0) ? 1 : 0;
        core[13] = produceVersion == null ? 0 : produceVersion;
        core[14] = number(v, "max_culprits");
        core[15] = number(v, "max_decompressed_bytes");
        if (core[14] < 0 || core[15] < 0) {
            throw new IllegalArgumentException("max_culprits and max_decompressed_bytes must be >= 0");
        }
        topicPartition = v.get("topic_partition").getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    /** Whether the broker re-encodes this row's append, so its size is checked on what it rebuilds
     * (_broker_rebuild.pxi; entries of magic 0/1, or a topic that re-encodes). */
    boolean rebuilt(byte[] row, int off, int len) {
        return mayRebuild && len > 16 && (alwaysRebuilt || row[off + 16] != 2);
    }

    private static boolean flag(Map<String, String> v, String key) {
        String s = v.get(key).toLowerCase();
        return s.equals("true") || s.equals("1") || s.equals("yes");
    }

    private static Long number(Map<String, String> v, String key) {
        String s = v.get(key);
        if (s == null || s.isEmpty() || s.equalsIgnoreCase("null") || s.equalsIgnoreCase("none")) {
            return null;
        }
        try {
            return Long.parseLong(s.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("kbatch_validate option " + key + ": not an integer: '" + s + "'");
        }
    }

    private static long codecId(String compression) {
        if (compression.equals("producer")) {
            return -1;
        }
        for (int id = 0; id < 8; id++) {
            if (compression.equals(Native.codecName(id))) {
                return id;
            }
        }
        return 0;
    }
}
