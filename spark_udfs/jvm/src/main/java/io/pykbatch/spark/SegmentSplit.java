package io.pykbatch.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** A split of one segment file: the entries starting in [start, end) (end -1: to the file's end). */
final class SegmentSplit implements InputPartition {
    private static final long serialVersionUID = 1L;
    final String path;
    final String topic;
    final int partition;
    final long segment;  // the base offset in the file's name
    final long start;
    final long end;
    long next = -1;  // the next segment's base offset in the same folder (-1: none): offsets here are below it
    boolean follows;  // a segment precedes it in its folder
    long previous = -1;  // the start of the split before it in the same segment (-1: none)
    // a tiered read's split (TieredPlan), null otherwise: offsets [first, last] read as a consumer
    // receives them (Native.segmentConsumer's spec), and leader_epoch's lineage
    long[] consumer;
    long[] epochStarts;
    int[] epochs;
    // a tiered split whose piece is an object of a remote store: its URL (read through Spark's Hadoop
    // file systems) and the byte ranges [a, b) of it (b -1: to its end) joined into the segment read
    String url;
    long[] byteRanges;

    /** The ranges read in this split: the read's, narrowed to what its consumer may be handed. */
    long[] ranges(long[] read) {
        if (consumer == null) {
            return read;
        }
        long first = consumer[3], end = consumer[4] == Long.MAX_VALUE ? Long.MAX_VALUE : consumer[4] + 1;
        if (consumer[0] != 0 && consumer[1] != 0) {
            end = Math.min(end, consumer[2]);  // nothing at or past the last stable offset
        }
        return SegmentRanges.within(read, first, end);
    }

    SegmentSplit(String path, String topic, int partition, long segment, long start, long end) {
        this.path = path;
        this.topic = topic;
        this.partition = partition;
        this.segment = segment;
        this.start = start;
        this.end = end;
    }
}
