package io.pykbatch.spark;

import java.io.RandomAccessFile;
import org.apache.spark.sql.types.StructType;

/**
 * tests/test_jvm_native.py: kafka-segment's JVM reader over a segment file that is cut to `keep`
 * bytes after the first window was read (as a broker's recovery truncates a segment): the reader
 * must go on to the new end -- no fault in native code, which would take the JVM down.  Prints the
 * rows of the first window and of the whole read.
 */
public final class SegmentTruncationProbe {
    public static void main(String[] a) throws Exception {
        String path = a[0];
        long windowBytes = Long.parseLong(a[1]);
        long keep = Long.parseLong(a[2]);
        SegmentReader reader = new SegmentReader(new SegmentSplit(path, "t", 0, 0, 0, -1),
            (StructType) Types.of("kafka-segment.records"), false, false, false, windowBytes, new SegmentRanges().packed(),
            null);
        long first = 0, total = 0;
        while (reader.next()) {
            int rows = reader.get().numRows();
            for (int r = 0; r < rows; r++) {  // every value read, as a query would
                total += reader.get().column(1).getBinary(r).length >= 0 ? 1 : 0;
            }
            if (first == 0) {
                first = total;
                try (RandomAccessFile f = new RandomAccessFile(path, "rw")) {
                    f.setLength(keep);
                }
            }
        }
        reader.close();
        System.out.println("ROWS " + first + " " + total);
    }
}
