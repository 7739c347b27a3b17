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

    SegmentSplit(String path, String topic, int partition, long segment, long start, long end) {
        this.path = path;
        this.topic = topic;
        this.partition = partition;
        this.segment = segment;
        this.start = start;
        this.end = end;
    }
}
