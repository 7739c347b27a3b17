package io.pykbatch.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * A segment's sparse indexes as the plan reads them (pykbatch.log.indexes: OffsetIndex, TimeIndex):
 * fixed-size big-endian entries after the base offset in the file's name, ending at the first entry
 * after the start whose offset is the base (zero-filled preallocated space); a missing or unreadable
 * file is no index.  Lookups are Python's bisect, so that an index out of order (a damaged one) gives
 * the Python source's answer too.
 */
final class SegmentIndexes {
    /** {suffix, entry size, where the relative offset is, where the other field is, its width} */
    static final Object[] OFFSET_INDEX = {".index", 8, 0, 4, 4};   // {int32 relative offset, int32 position}
    static final Object[] TIME_INDEX = {".timeindex", 12, 8, 0, 8}; // {int64 timestamp, int32 relative offset}

    private SegmentIndexes() { }

    /** {keys, values} of the index of `kind` beside the segment log: an offset index's {offsets,
     * positions}, a time index's {timestamps, offsets}; null when it cannot be read. */
    static long[][] read(String log, Object[] kind, long base) {
        byte[] data;
        try {
            data = Files.readAllBytes(Paths.get(log.substring(0, log.length() - ".log".length()) + kind[0]));
        } catch (IOException | OutOfMemoryError | RuntimeException e) {
            return null;
        }
        int size = (Integer) kind[1], relativeAt = (Integer) kind[2], otherAt = (Integer) kind[3];
        boolean otherLong = (Integer) kind[4] == 8;
        ByteBuffer b = ByteBuffer.wrap(data);
        int n = 0;
        long[] offsets = new long[data.length / size], others = new long[data.length / size];
        for (int i = 0; i < data.length / size; i++) {
            long offset = base + b.getInt(i * size + relativeAt);
            if (i > 0 && offset == base) {
                break;
            }
            offsets[n] = offset;
            others[n++] = otherLong ? b.getLong(i * size + otherAt) : b.getInt(i * size + otherAt);
        }
        offsets = java.util.Arrays.copyOf(offsets, n);
        others = java.util.Arrays.copyOf(others, n);
        return otherLong ? new long[][] {others, offsets} : new long[][] {offsets, others};
    }

    /** Python's bisect.bisect_left over a (maybe unsorted) array. */
    static int bisectLeft(long[] a, long x) {
        int lo = 0, hi = a.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (a[mid] < x) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /** Python's bisect.bisect_right over a (maybe unsorted) array. */
    static int bisectRight(long[] a, long x) {
        int lo = 0, hi = a.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (x < a[mid]) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        return lo;
    }
}
