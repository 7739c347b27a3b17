package io.pykbatch.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * A segment's sparse indexes as the plan reads them (pykbatch.log.indexes: OffsetIndex, TimeIndex):
 * fixed-size big-endian entries after the base offset in the file's name, ending at the first entry
 * after the start whose offset is the base (zero-filled preallocated space); a missing or unreadable
 * file is no index.  Each file's layout (suffix, entry fields, which field is relative to the base)
 * is pykbatch's, written into the jar's build.properties.  Lookups are Python's bisect, so that an
 * index out of order (a damaged one) gives the Python source's answer too.
 */
final class SegmentIndexes {
    /** An index file's layout: its suffix, its entry's two fields (struct format), the relative one. */
    static final class Layout {
        final String suffix;
        final int[] width = new int[2];
        final int relative;

        Layout(String property) {
            String[] parts = Native.BUILD.getProperty(property).split(" ");  // ".index >ii 0"
            suffix = parts[0];
            for (int f = 0; f < 2; f++) {
                width[f] = parts[1].charAt(1 + f) == 'q' ? 8 : 4;  // '>' then 'q' (int64) or 'i' (int32)
            }
            relative = Integer.parseInt(parts[2]);
        }

        int size() {
            return width[0] + width[1];
        }
    }

    static final Layout OFFSET_INDEX = new Layout("offset_index");  // {relative offset, position}
    static final Layout TIME_INDEX = new Layout("time_index");      // {timestamp, relative offset}

    private SegmentIndexes() { }

    /** The entries' two fields, the relative one made absolute: an offset index's {offsets,
     * positions}, a time index's {timestamps, offsets}; null when the file cannot be read. */
    static long[][] read(String log, Layout kind, long base) {
        byte[] data;
        try {
            data = Files.readAllBytes(Paths.get(log.substring(0, log.length() - ".log".length()) + kind.suffix));
        } catch (IOException | OutOfMemoryError | RuntimeException e) {
            return null;
        }
        int size = kind.size(), slots = data.length / size, n = 0;
        ByteBuffer b = ByteBuffer.wrap(data);
        long[][] out = {new long[slots], new long[slots]};
        for (int i = 0; i < slots; i++) {
            long[] entry = new long[2];
            for (int f = 0, at = i * size; f < 2; at += kind.width[f], f++) {
                entry[f] = kind.width[f] == 8 ? b.getLong(at) : b.getInt(at);
            }
            entry[kind.relative] += base;
            if (i > 0 && entry[kind.relative] == base) {
                break;
            }
            out[0][n] = entry[0];
            out[1][n++] = entry[1];
        }
        return new long[][] {java.util.Arrays.copyOf(out[0], n), java.util.Arrays.copyOf(out[1], n)};
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
