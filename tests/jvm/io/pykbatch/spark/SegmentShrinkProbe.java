package io.pykbatch.spark;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Random;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * tests/test_jvm_native.py: kafka-segment's JVM reader, validating, over a segment that another
 * thread cuts to a drawn size (or deletes) at a drawn moment while it is read, as a broker does on a
 * leader change or for retention: no fault may take the JVM down, and what the cut took is a row
 * (log.file_shrank), or -- cut between a window's read and its checks -- the task fails with an
 * IOException saying so (Spark runs it again).  Prints one line a run: "RUN <cut> <size> <records>
 * <shrank rows> <other lost rows> <failed: 0 no, 1 with the shrink named, 2 otherwise>".
 */
public final class SegmentShrinkProbe {
    public static void main(String[] a) throws Exception {
        Path pristine = Paths.get(a[0]);
        Path path = Paths.get(a[1]);
        long windowBytes = Long.parseLong(a[2]);
        int runs = Integer.parseInt(a[3]);
        Random rng = new Random(Long.parseLong(a[4]));
        StructType schema = new StructType(concat(((StructType) Types.of("kafka-segment.records")).fields(),
            ((StructType) Types.of("kafka-segment.validation")).fields()));
        int lost = schema.fieldIndex("lost_bytes"), rule = schema.fieldIndex("error_rule");
        long size = Files.size(pristine);
        for (int run = 0; run < runs; run++) {
            Files.copy(pristine, path, StandardCopyOption.REPLACE_EXISTING);
            long cut = rng.nextInt(4) == 0 ? -1 : (long) (rng.nextDouble() * size);  // -1: deleted
            long delayMicros = rng.nextInt(40_000);
            Thread cutter = new Thread(() -> {
                try {
                    Thread.sleep(delayMicros / 1000, (int) (delayMicros % 1000) * 1000);
                    if (cut < 0) {
                        Files.delete(path);
                    } else {
                        try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(path.toFile(), "rw")) {
                            f.setLength(cut);
                        }
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            SegmentReader reader = new SegmentReader(new SegmentSplit(path.toString(), "t", 0, 0, 0, -1), schema,
                false, true, false, windowBytes, new SegmentRanges().packed(), null);
            cutter.start();
            long records = 0, shrank = 0, other = 0, failed = 0;
            try {
                while (reader.next()) {
                    ColumnarBatch b = reader.get();
                    for (int r = 0; r < b.numRows(); r++) {
                        if (b.column(lost).isNullAt(r)) {
                            records += b.column(1).isNullAt(r) ? 0 : 1;  // every value read, as a query would
                        } else if (b.column(rule).getUTF8String(r).toString().equals("log.file_shrank")) {
                            shrank++;
                        } else {
                            other++;
                        }
                    }
                }
            } catch (java.io.IOException e) {  // the file shrank between a window's read and its checks: the
                failed = e.getMessage().contains("shrank") ? 1 : 2;  // task fails, named (Spark runs it again)
            } finally {
                reader.close();
                cutter.join();
            }
            System.out.println("RUN " + cut + " " + size + " " + records + " " + shrank + " " + other + " " + failed);
        }
        System.out.println("DONE");
    }

    private static StructField[] concat(StructField[] x, StructField[] y) {
        StructField[] out = java.util.Arrays.copyOf(x, x.length + y.length);
        System.arraycopy(y, 0, out, x.length, y.length);
        return out;
    }
}
