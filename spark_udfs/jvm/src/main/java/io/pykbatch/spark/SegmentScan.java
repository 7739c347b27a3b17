package io.pykbatch.spark;

import java.util.EnumSet;
import java.util.Set;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** A kafka-segment read on the JVM: the table, its scan and its batch (the splits SegmentPlan
 * makes), read columnar by SegmentReader. */
final class SegmentScan implements SupportsRead, ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters,
    Scan, Batch {
    private final StructType schema;
    private StructType read;  // the columns the query reads (all, until Spark prunes them)
    private final SegmentPrune prune = new SegmentPrune();
    private final SegmentRanges ranges;
    private final SegmentStore store;  // null: local files
    private final boolean narrows;  // pushFilters: WHERE clauses on offset and timestamp narrow the ranges too
    private final String path;
    private final boolean batches;
    private final boolean validate;
    private final boolean compacted;  // offsets missing between entries are the log cleaner's
    private final long splitBytes;
    private final long windowBytes;
    private final java.util.Map<String, String> tiered;  // a tiered read's options (TieredPlan), else null
    private InputPartition[] tieredSplits;  // its plan: a Python process run on the driver, so run once

    SegmentScan(StructType schema, String path, boolean batches, boolean validate, boolean compacted, long splitBytes,
                long windowBytes, SegmentRanges ranges, boolean pushFilters, SegmentStore store,
                java.util.Map<String, String> tiered) {
        this.tiered = tiered;
        this.schema = schema;
        this.store = store;
        this.ranges = ranges;
        this.narrows = pushFilters && !batches;  // segment_plan.narrow: records mode only
        this.read = schema;
        this.path = path;
        this.batches = batches;
        this.validate = validate;
        this.compacted = compacted;
        this.splitBytes = splitBytes;
        this.windowBytes = windowBytes;
    }

    @Override public String name() { return SegmentSource.NAME + " " + path; }
    @Override public StructType schema() { return schema; }
    @Override public Set<TableCapability> capabilities() { return EnumSet.of(TableCapability.BATCH_READ); }
    @Override public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) { return this; }
    @Override public Scan build() { return this; }
    @Override public StructType readSchema() { return read; }
    @Override public void pruneColumns(StructType required) { read = required; }

    /** Every filter stays Spark's to evaluate; those on topic, partition and offset also prune
     * segments, and with the pushFilters option those on offset and timestamp narrow the ranges read
     * as the Python source's pushFilters does (which changes the windows, hence batch_index: opt-in). */
    @Override
    public Filter[] pushFilters(Filter[] filters) {
        for (Filter f : filters) {
            prune.add(f);
            if (narrows) {
                ranges.narrow(f);
            }
        }
        return filters;
    }

    @Override
    public Filter[] pushedFilters() {
        return prune.used.toArray(new Filter[0]);
    }
    @Override public String description() { return SegmentSource.NAME + " (pykbatch's core on the JVM) " + path; }
    @Override public Batch toBatch() { return this; }

    @Override
    public InputPartition[] planInputPartitions() {
        if (tiered != null) {  // the Python plan's splits (its own pruning by the ranges), planned once
            if (tieredSplits == null) {
                tieredSplits = TieredPlan.splits(tiered, splitBytes, ranges, store).toArray(new InputPartition[0]);
            }
            return tieredSplits;
        }
        return SegmentPlan.splits(path, splitBytes, ranges, store).stream().filter(s -> prune.keeps(s, s.next))
            .toArray(InputPartition[]::new);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new Readers(read, batches, validate, compacted, windowBytes, ranges.packed(), store);
    }

    /** Sent to the executors: makes each split's columnar reader. */
    static final class Readers implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final StructType schema;
        private final boolean batches;
        private final boolean validate;
        private final boolean compacted;
        private final long windowBytes;
        private final long[] ranges;
        private final SegmentStore store;

        Readers(StructType schema, boolean batches, boolean validate, boolean compacted, long windowBytes, long[] ranges,
                SegmentStore store) {
            this.ranges = ranges;
            this.store = store;
            this.schema = schema;
            this.batches = batches;
            this.validate = validate;
            this.compacted = compacted;
            this.windowBytes = windowBytes;
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new SegmentReader((SegmentSplit) partition, schema, batches, validate, compacted, windowBytes, ranges,
                store);
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("kafka-segment on the JVM reads columnar batches only");
        }
    }
}
