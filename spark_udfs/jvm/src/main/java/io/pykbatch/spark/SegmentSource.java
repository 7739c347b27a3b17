package io.pykbatch.spark;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("kafka-segment")} with pykbatch's jar on the classpath: local segments,
 * one row per record or per batch, read columnar by the core on the JVM; ranges of offsets and
 * timestamps (SegmentRanges: segments by name, starts by their indexes, entries and records by the
 * core's rule); WHERE clauses on topic, partition and offset pruning whole segments (SegmentPrune,
 * with no option or setting) and, with pushFilters, narrowing the ranges.  A tiered store (its
 * metadata, local dirs and isolation level), on a local file system or in a store the session's
 * Hadoop file systems serve, is planned by pykbatch's Python on the driver and read by the core
 * (TieredPlan).  A read it does not serve -- options beyond {@link #SERVED} (decode, value decodings,
 * format), a URL no Hadoop file system of the session serves (fsspec's), fs.* options outside a
 * tiered read, or a session registered for the Python path -- goes to the Python
 * source, registered by spark_udfs.register(spark) as {@link #PYTHON} (Spark 4.0+), so every
 * option stays reachable under the one name.
 */
public final class SegmentSource implements TableProvider, DataSourceRegister {
    static final String NAME = "kafka-segment";
    static final String PYTHON = Native.BUILD.getProperty("python_segment_source");
    // lower case: Spark's options are case-insensitive
    static final Set<String> SERVED = new HashSet<>(Arrays.asList(
        "path", "mode", "deep", "validate", "compacted", "includepath", "splitbytes", "windowbytes", "startingoffset",
        "endingoffset", "startingtimestamp", "endingtimestamp", "pushfilters"));
    private static final long SPLIT_BYTES = 64L << 20, WINDOW_BYTES = 8L << 20;
    private TableProvider python;
    private static final java.util.concurrent.atomic.AtomicBoolean TIERED_VALIDATE_SAID =
        new java.util.concurrent.atomic.AtomicBoolean();
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger("pykbatch.segment");

    @Override
    public String shortName() {
        return NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        if (!served(options)) {
            try {
                return python().inferSchema(options);
            } catch (Exception e) {  // Spark's AnalysisException is not a RuntimeException
                throw unregistered(e);
            }
        }
        return schema(options, TieredPlan.isTiered(options, options.get("path"), SegmentStore.of(options.get("path"))));
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        CaseInsensitiveStringMap options = new CaseInsensitiveStringMap(properties);
        if (!served(options)) {
            return python().getTable(schema, partitioning, properties);
        }
        SegmentStore store = SegmentStore.of(options.get("path"));
        boolean tiered = TieredPlan.isTiered(options, options.get("path"), store);
        return new SegmentScan(schema(options, tiered), options.get("path"), mode(options).equals("batches"),
            validates(options), flag(options, "compacted"), number(options, "splitBytes", SPLIT_BYTES),
            number(options, "windowBytes", WINDOW_BYTES), SegmentRanges.of(options), flag(options, "pushFilters"),
            store, tiered ? options.asCaseSensitiveMap() : null);
    }

    /** The Python source's columns (spark_udfs.segment_columns.arrow_schema): [path,] the records' or
     * the batches' [, verdict] [, leader_epoch of a tiered read]. */
    static StructType schema(CaseInsensitiveStringMap options, boolean tiered) {
        java.util.List<StructField> fields = new java.util.ArrayList<>();
        for (String part : new String[] {"path", mode(options), "validation", "tiered"}) {
            if (part.equals("tiered") ? tiered : !part.equals("path") && !part.equals("validation")
                || (part.equals("path") ? flag(options, "includePath") : validates(options))) {
                fields.addAll(Arrays.asList(((StructType) Types.of(NAME + "." + part)).fields()));
            }
        }
        return new StructType(fields.toArray(new StructField[0]));
    }

    /** Whether this read is the JVM's: a local path or one the session's Hadoop file systems serve
     * (SegmentStore), no option but SERVED and a tiered read's, and a session not registered for the
     * Python path; a tiered store wherever those are (TieredPlan). */
    static boolean served(CaseInsensitiveStringMap options) {
        boolean tieredOptions = false;
        for (String key : options.keySet()) {
            tieredOptions |= TieredPlan.isTieredOption(key);
            if (!SERVED.contains(key.toLowerCase(Locale.ROOT)) && !TieredPlan.isTieredOption(key)) {
                return false;
            }
        }
        String path = options.get("path");
        if (path == null || pythonSession()) {
            return false;
        }
        SegmentStore store = SegmentPlan.isLocal(path) ? null : SegmentStore.of(path);
        if (!SegmentPlan.isLocal(path) && store == null) {
            return false;
        }
        boolean tiered = TieredPlan.isTiered(options, path, store);
        if (tiered && validates(options)) {
            // a validated tiered read names what it cannot read in rows of its own (the tiered reader's
            // walk, pykbatch.tiered.partition): the Python source's, which Spark 3.x cannot run -- there
            // the read is refused rather than let a range vanish without a row
            if (!pythonSourceExists()) {
                throw new IllegalArgumentException("kafka-segment: a validated read of a tiered store (validate is "
                    + "on by default in records mode) gives the ranges it cannot read rows of their own, and those "
                    + "come from pykbatch's Python source, which needs Spark 4.0+; on Spark "
                    + (SparkSession.getActiveSession().isDefined() ? SparkSession.getActiveSession().get().version() : "3.x")
                    + " pass validate=false to read what is readable (unreadable ranges then have no row; "
                    + "`pykbatch tiered export` names them), or run on Spark 4.0+");
            }
            if (TIERED_VALIDATE_SAID.compareAndSet(false, true)) {
                LOG.warn("kafka-segment: a validated tiered read runs on the Python source (its rows for what cannot "
                    + "be read are not on the JVM yet); validate=false reads on the JVM");
            }
            return false;
        }
        return tiered || !tieredOptions;
    }

    /** records (every record decoded) or batches (headers only), from mode or deep, as
     * segment_plan.read_mode reads them. */
    static String mode(CaseInsensitiveStringMap options) {
        String mode = options.get("mode"), deep = options.get("deep");
        if (deep != null) {
            String implied = deep.equalsIgnoreCase("true") ? "records" : "batches";
            if (mode != null && !mode.equals(implied)) {
                throw new IllegalArgumentException("kafka-segment: deep=" + deep + " contradicts mode=" + mode);
            }
            mode = implied;
        }
        mode = mode == null ? "records" : mode;
        if (!mode.equals("records") && !mode.equals("batches")) {
            throw new IllegalArgumentException("kafka-segment: mode is 'records' or 'batches', not '" + mode + "'");
        }
        return mode;
    }

    /** Whether the read is validated: by default in records mode, not in batches mode
     * (segment_plan.validates). */
    static boolean validates(CaseInsensitiveStringMap options) {
        String value = options.get("validate");
        if (value == null || value.trim().isEmpty()) {
            return mode(options).equals("records");
        }
        if (!value.trim().equalsIgnoreCase("true") && !value.trim().equalsIgnoreCase("false")) {
            throw new IllegalArgumentException("kafka-segment: validate is true or false, not '" + value + "'");
        }
        return value.trim().equalsIgnoreCase("true");
    }

    private static boolean pythonSession() {
        return SparkSession.getActiveSession().isDefined()
            && "python".equals(SparkSession.getActiveSession().get().conf().get(Native.BUILD.getProperty("path_setting"), "jvm"));
    }

    static boolean flag(CaseInsensitiveStringMap options, String key) {
        return options.getOrDefault(key, "false").equalsIgnoreCase("true");
    }

    static long number(CaseInsensitiveStringMap options, String key, long fallback) {
        String value = options.get(key);
        if (value == null || value.isEmpty()) {
            return fallback;
        }
        try {
            long n = Long.parseLong(value.trim());
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // named below
        }
        throw new IllegalArgumentException("kafka-segment: " + key + " must be a positive number of bytes, not '"
            + value + "'");
    }

    /** Spark's failure to find the Python source said in pykbatch's words (other failures as they are). */
    private static RuntimeException unregistered(Exception e) {
        String message = String.valueOf(e.getMessage());
        if (message.contains(PYTHON) && (message.contains("NOT_EXIST") || message.contains("NOT_FOUND"))) {
            return new IllegalStateException("kafka-segment: this read (options beyond " + SERVED + ", "
                + "a remote path or a session on the Python path) is the Python source's: register it with "
                + "spark_udfs.register(spark)", e);
        }
        return SegmentSource.<RuntimeException>rethrow(e);
    }

    /** Throws e as it is (a Scala exception Java counts as checked). */
    @SuppressWarnings("unchecked")
    private static <T extends Exception> RuntimeException rethrow(Exception e) throws T {
        throw (T) e;
    }

    /** The Python source (Spark 4.0+'s PythonDataSourceV2 under {@link #PYTHON}). */
    /** Whether Spark can run a Python data source (PythonDataSourceV2, Spark 4.0+). */
    private static boolean pythonSourceExists() {
        try {
            Class.forName("org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2");
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    private TableProvider python() {
        if (python == null) {
            try {
                Class<?> cls = Class.forName("org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2");
                Object provider = cls.getDeclaredConstructor().newInstance();
                cls.getMethod("setShortName", String.class).invoke(provider, PYTHON);
                python = (TableProvider) provider;
            } catch (ReflectiveOperationException | LinkageError e) {
                throw new UnsupportedOperationException("kafka-segment: this read (options beyond " + SERVED
                    + " or a remote path) needs pykbatch's Python source, which needs Spark 4.0+", e);
            }
        }
        return python;
    }
}
