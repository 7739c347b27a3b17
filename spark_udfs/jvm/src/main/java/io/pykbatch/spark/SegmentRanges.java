package io.pykbatch.spark;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The record ranges of a kafka-segment read -- offsets [firstOffset, endOffset), timestamps
 * [firstTimestamp, endTimestamp) in epoch milliseconds, null for an open side -- from the options
 * startingOffset / endingOffset / startingTimestamp / endingTimestamp and, with pushFilters, the
 * WHERE clauses Spark pushes; as segment_plan.Ranges has them.  Which entries and records they keep
 * is the core's rule (kb_ranges.h, handed over by {@link #packed()}); here only what the plan needs:
 * whether a segment can hold records in range, and where in it the first can start.
 */
final class SegmentRanges implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    // kb_ranges.h's KB_RANGE_* bits
    private static final int FIRST_OFFSET = 1, END_OFFSET = 2, FIRST_TIMESTAMP = 4, END_TIMESTAMP = 8;
    Long firstOffset, endOffset, firstTimestamp, endTimestamp;

    static SegmentRanges of(CaseInsensitiveStringMap options) {
        SegmentRanges r = new SegmentRanges();
        r.firstOffset = number(options, "startingOffset");
        r.endOffset = number(options, "endingOffset");
        r.firstTimestamp = number(options, "startingTimestamp");
        r.endTimestamp = number(options, "endingTimestamp");
        return r;
    }

    private static Long number(CaseInsensitiveStringMap options, String key) {
        String value = options.get(key);
        if (value == null || value.isEmpty()) {
            return null;
        }
        try {
            return Long.parseLong(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("kafka-segment: " + key + " must be a whole number, not '" + value + "'");
        }
    }

    boolean any() {
        return firstOffset != null || endOffset != null || firstTimestamp != null || endTimestamp != null;
    }

    /** The ranges as Native.segmentOpen takes them: {bits, first offset, end offset, first timestamp, end timestamp}. */
    long[] packed() {
        int bits = (firstOffset != null ? FIRST_OFFSET : 0) | (endOffset != null ? END_OFFSET : 0)
            | (firstTimestamp != null ? FIRST_TIMESTAMP : 0) | (endTimestamp != null ? END_TIMESTAMP : 0);
        return new long[] {bits, value(firstOffset), value(endOffset), value(firstTimestamp), value(endTimestamp)};
    }

    private static long value(Long v) {
        return v == null ? 0 : v;
    }

    /** packed ranges narrowed to offsets [first, end) (end Long.MAX_VALUE: open at the top). */
    static long[] within(long[] packed, long first, long end) {
        long[] out = packed.clone();
        out[1] = (out[0] & FIRST_OFFSET) != 0 ? Math.max(out[1], first) : first;
        out[0] |= FIRST_OFFSET;
        if (end != Long.MAX_VALUE) {
            out[2] = (out[0] & END_OFFSET) != 0 ? Math.min(out[2], end) : end;
            out[0] |= END_OFFSET;
        }
        return out;
    }

    /** The offsets and timestamps set, as spark_udfs.tiered_plan reads them (null: open). */
    Long[] bounds() {
        return new Long[] {firstOffset, endOffset, firstTimestamp, endTimestamp};
    }

    /** Whether a segment named base, followed in its folder by next (-1: none), can hold offsets in
     * range: it holds [base, next) (Kafka's log invariant; segment_plan.Ranges.keeps_segment). */
    boolean keepsSegment(long base, long next) {
        if (endOffset != null && (endOffset == Long.MIN_VALUE || firstOffset != null && firstOffset >= endOffset)) {
            return false;  // below every offset, or an empty range
        }
        return SegmentPlan.holds(base, next, firstOffset == null ? Long.MIN_VALUE : firstOffset,
            endOffset == null ? Long.MAX_VALUE : endOffset - 1);
    }

    // ---- WHERE clauses (segment_plan.narrow): conservative, Spark still evaluates each one ----

    /** Tightened by a pushed filter on offset or timestamp (records mode); any other is ignored. */
    void narrow(Filter f) {
        String column = f.references().length == 1 ? f.references()[0] : null;
        if (!"offset".equals(column) && !"timestamp".equals(column)) {
            return;
        }
        Object[] values = f instanceof In ? ((In) f).values() : new Object[] {comparedWith(f)};
        if (values.length == 0 || values[0] == null) {
            return;
        }
        long low = Long.MAX_VALUE, high = Long.MIN_VALUE;  // the smallest and largest value, in ms for timestamps
        for (Object v : values) {
            Long at = "offset".equals(column) ? (v instanceof Long ? (Long) v : null) : millis(v, false);
            Long up = "offset".equals(column) ? at : millis(v, true);
            if (at == null || up == null) {
                return;
            }
            low = Math.min(low, at);
            high = Math.max(high, up);
        }
        boolean offsets = "offset".equals(column);
        // [lo, hi) the filter keeps (null: open); the integer bounds of segment_plan._BOUNDS / _datetime_bounds
        Long lo = null, hi = null;
        if (f instanceof GreaterThan) {
            lo = offsets ? plusOne(low) : (Long) low;
        } else if (f instanceof GreaterThanOrEqual) {
            lo = low;
        } else if (f instanceof LessThan) {
            hi = high;
        } else if (f instanceof LessThanOrEqual || f instanceof EqualTo || f instanceof In) {
            hi = plusOne(high);
            lo = f instanceof LessThanOrEqual ? null : (Long) low;
        } else {
            return;
        }
        if (offsets) {
            firstOffset = max(firstOffset, lo);
            endOffset = min(endOffset, hi);
        } else {
            firstTimestamp = max(firstTimestamp, lo);
            endTimestamp = min(endTimestamp, hi);
        }
    }

    private static Object comparedWith(Filter f) {
        return f instanceof EqualTo ? ((EqualTo) f).value() : f instanceof GreaterThan ? ((GreaterThan) f).value()
            : f instanceof GreaterThanOrEqual ? ((GreaterThanOrEqual) f).value() : f instanceof LessThan
            ? ((LessThan) f).value() : f instanceof LessThanOrEqual ? ((LessThanOrEqual) f).value() : null;
    }

    /** x + 1, or null (no upper bound can be said) past a long. */
    private static Long plusOne(long x) {
        return x == Long.MAX_VALUE ? null : x + 1;
    }

    /** A timestamp filter's value in epoch milliseconds, rounded down, or up with `up` (null: not a timestamp). */
    private static Long millis(Object v, boolean up) {
        Instant at = v instanceof Timestamp ? ((Timestamp) v).toInstant() : v instanceof Instant ? (Instant) v : null;
        if (at == null) {
            return null;
        }
        long ms = at.getEpochSecond() * 1000 + at.getNano() / 1_000_000;
        boolean fraction = at.getNano() % 1_000_000 != 0;
        return up && fraction ? ms + 1 : ms;
    }

    private static Long max(Long a, Long b) {
        return a == null ? b : b == null ? a : Long.valueOf(Math.max(a, b));
    }

    private static Long min(Long a, Long b) {
        return a == null ? b : b == null ? a : Long.valueOf(Math.min(a, b));
    }

    // ---- where a segment's first record in range can start (segment_plan.start_position) ----

    /** The byte position to start a segment at: its offset index (`index`, SegmentIndexes.read's;
     * null: none) entry for the first offset in range, and
     * for the last .timeindex entry before the first timestamp, whichever is later -- each only where
     * the log confirms it (Native.indexEntryTrusted: indexes can be stale); 0 without them. */
    long startPosition(String log, long base, long[][] index) {
        List<Long> targets = new ArrayList<>();
        if (firstOffset != null) {
            targets.add(firstOffset);
        }
        if (firstTimestamp != null) {
            long[][] time = SegmentIndexes.read(log, SegmentIndexes.TIME_INDEX, base);
            if (time != null) {  // an entry (T, o): every record up to offset o has a timestamp <= T
                int i = SegmentIndexes.bisectLeft(time[0], firstTimestamp);
                if (i > 0) {
                    targets.add(time[1][i - 1]);
                }
            }
        }
        if (targets.isEmpty() || index == null) {
            return 0;
        }
        long start = 0;
        for (long target : targets) {
            int i = SegmentIndexes.bisectRight(index[0], Math.max(target, base));
            long offset = i > 0 ? index[0][i - 1] : base, position = i > 0 ? index[1][i - 1] : 0;
            start = Math.max(start, Native.indexEntryTrusted(log, position, base, offset) ? position : 0);
        }
        return start;
    }
}
