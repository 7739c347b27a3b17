package io.pykbatch.spark;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Properties;

/**
 * pykbatch's C core in this JVM: the shim library (csrc/jni/kb_jni.c) carried in the jar, loaded
 * once per JVM, and refused when it was not built with the jar (a stale library beside a newer jar
 * would read options and culprits in another layout).
 */
public final class Native {
    private Native() {}

    /** The build the jar's classes and resources belong to (written by spark_udfs/jvm_build.py). */
    public static final Properties BUILD = resource("build.properties");

    static {
        load();
    }

    private static Properties resource(String name) {
        Properties p = new Properties();
        try (InputStream in = Native.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException("pykbatch's jar lacks " + name + ": rebuild it (spark_udfs.jvm.jar())");
            }
            p.load(in);
        } catch (IOException e) {
            throw new IllegalStateException("pykbatch: cannot read " + name + " from its jar", e);
        }
        return p;
    }

    private static void load() {
        String arch = System.getProperty("os.arch");
        String lib = "native/" + System.getProperty("os.name").toLowerCase().replace(' ', '_') + "-" + arch
            + "/libpykbatch_jni.so";
        try (InputStream in = Native.class.getResourceAsStream(lib)) {
            if (in == null) {
                throw new UnsatisfiedLinkError("pykbatch's jar carries no native library for " + lib
                    + ": use the Python functions (spark_udfs.register(spark, jvm=False)) on this platform");
            }
            Path tmp = Files.createTempFile("libpykbatch_jni", ".so");
            try {
                Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
                System.load(tmp.toString());
            } finally {
                Files.deleteIfExists(tmp);  // the mapping stays; the name is not needed again
            }
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("pykbatch: cannot unpack its native library: " + e);
        }
        String want = BUILD.getProperty("version");
        String got = version();
        if (!got.equals(want)) {
            throw new UnsatisfiedLinkError("pykbatch: the native library is build " + got + " but the jar's classes are "
                + want + ": two pykbatch jars on one classpath? Keep one (spark_udfs.jvm.jar())");
        }
    }

    /** Rule ids by the core's rule number; their flags (KB_KAFKA 1, KB_PER_RECORD 2, KB_BETWEEN 4). */
    public static final String[] RULE_IDS = ruleIds();
    public static final int[] RULE_FLAGS = ruleFlags();
    /** Kafka's error code of each rule. */
    public static final int[] RULE_CODES = ruleCodes();
    public static final int KAFKA = 1;

    static native String version();

    static native long open(long[] options, Decompressor decompressor, java.nio.ByteBuffer summary);

    static native void close(long handle);

    static native int validate(long handle, byte[] buf, int off, int len, long nowMs);

    static native void culprits(long handle, long[] out);

    /** validate over len bytes at address (memory that does not move: a mapped segment). */
    /** kbatch_repair of row[off, off + len), which the validator just validated: the rebuilt bytes. */
    static native byte[] repair(long handle, byte[] row, int off, int len);

    /** The last repair's dropped records (RepairFunction's D_* layout). */
    static native long[] repairDropped(long handle);

    /** The last repair's dropped keys and values. */
    static native byte[] repairBytes(long handle);

    /** The last repair's dropped records' culprits (indexes into the validator's). */
    static native int[] repairCulprits(long handle);

    static native int validateAt(long handle, long address, long len, long nowMs);

    /** What segmentNext makes of a window (kb_jni.c FILL_*): its records' columns, their count
     * alone, or nothing (batches mode reads the entries' headers with segmentHeaders). */
    static final int FILL_COLUMNS = 0, FILL_COUNT = 1, FILL_HEADERS = 2;

    /** A split [start, end) of the segment file at path (end < 0: to its end), mapped; the windows'
     * counts and column addresses are written to info (SegmentWindow's layout), filled as `fill` says;
     * only entries and records in `ranges` (SegmentRanges.packed()) read. */
    static native long segmentOpen(String path, long start, long end, long windowBytes, boolean verifyCrc,
                                   int fill, long maxDecompressed, Decompressor decompressor,
                                   java.nio.ByteBuffer info, long[] ranges);

    /** The walk of an open reader reads as a consumer of offsets [first, last] receives them (the
     * tiered reader: kb_log_consumer): spec = {committed, 1 when a last stable offset is known, that
     * offset, first, last, then the aborted transactions' (first offset, producer id) pairs}. */
    static native void segmentConsumer(long handle, long[] spec);

    /** Whether the segment file's offset index entry (offset, position) can be followed: the core's
     * kb_index_entry_trusted (false when the file cannot be read). */
    static native boolean indexEntryTrusted(String path, long position, long segmentBase, long offset);

    /** The last window's entry headers: BatchInfoFunction.WIDTH longs each, positions in the segment. */
    static native long[] segmentHeaders(long handle);

    /** The next window of the split into the reader's columns: 1, or 0 when the split is read. */
    static native int segmentNext(long handle);

    /** Starts the account of what an open reader's walk passes over (kb_log_account, before its first
     * window): its state as SegmentLosses.ST_* longs, as a walk of the segment from byte 0 knows it at
     * the split's start. */
    static native long[] segmentAccount(long handle);

    /** The account's state now (SegmentLosses.ST_*). */
    static native long[] segmentState(long handle);

    /** The spans the walk passed over whose neighbours are known, SegmentLosses.SK_WIDTH longs each,
     * each handed out once. */
    static native long[] segmentSkips(long handle);

    /** The last window's entries as the account read them, SegmentLosses.EN_WIDTH longs each. */
    static native long[] segmentEntries(long handle);

    static native void segmentClose(long handle);

    /** A decoder for kbatch_decode: its columns' addresses go to info (SegmentWindow's layout). */
    static native long decoderOpen(boolean verifyCrc, long maxDecompressed, Decompressor decompressor,
                                   java.nio.ByteBuffer info);

    /** Decodes row[off, off + len): its record count, or -1 when it does not decode cleanly. */
    static native int decodeRow(long handle, byte[] row, int off, int len);

    static native void decoderClose(long handle);

    /** kbatch_batch_info of row[off, off + len) with a decoder's codecs: BatchInfo.WIDTH longs an
     * entry, in BatchInfo's order (kb_jni.c's BI_*). */
    static native long[] batchInfo(long handle, byte[] row, int off, int len);

    /** A packed Avro program (spark_udfs/jvm_avro.py) and its columns; their addresses go to info. */
    static native long avroOpen(byte[] program, int[] conversions, java.nio.ByteBuffer info);

    /** Whether avroDecode writes each datum as an UnsafeRow (its address and size after the fault). */
    static native boolean avroUnsafe(long handle);

    /** One datum into the columns: 0, or -1 when it cannot be read (the fault after the columns). */
    static native int avroDecode(long handle, byte[] row, int off, int len, int start, boolean allowTrailing);

    /** The Confluent framing of value: 0 with out[0] the schema id, out[1] the datum's start; else
     * the fault's rule index with out[0] its position (kb_read_frame). */
    static native int readFrame(byte[] value, long[] out);

    static native void avroClose(long handle);

    /** The name of timestamp type `index` (a decoded record's timestamp_type), from the core. */
    static native String timestampTypeName(int index);

    static native void verdict(long handle, int[] out);

    static native byte[] render(int rule, int which, long[] culprits, int at, byte[] topicPartition);

    static native byte[] recordErrors(int code, int records, int[] indexes, byte[][] messages);

    static native String[] ruleIds();

    /** A rule's message template (`stage` false) or stage. */
    static native String ruleText(int rule, boolean stage);

    static native int[] ruleFlags();

    static native int[] ruleCodes();

    static native String errorName(int code);

    static native String codecName(int codec);

    static native long crc32c(byte[] value);
}
