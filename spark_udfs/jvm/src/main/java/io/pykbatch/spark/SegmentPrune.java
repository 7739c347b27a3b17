package io.pykbatch.spark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;

/**
 * WHERE clauses on topic, partition and offset, used to leave out whole segments -- those of other
 * topic-partitions, and those whose offsets, [base, the next segment's base) by Kafka's log
 * invariant, miss the range -- as segment_plan.Ranges.keeps_segment prunes them.  Spark still
 * evaluates every filter on the rows read, so the pruning only has to be conservative.
 */
final class SegmentPrune implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private Set<String> topics;
    private Set<Integer> partitions;
    private long low = Long.MIN_VALUE;   // offsets kept: [low, high]
    private long high = Long.MAX_VALUE;
    final List<Filter> used = new ArrayList<>();

    void add(Filter f) {
        String column = f.references().length == 1 ? f.references()[0] : null;
        if ("topic".equals(column) && (f instanceof EqualTo || f instanceof In)) {
            topics = intersect(topics, values(f), String.class);
        } else if ("partition".equals(column) && (f instanceof EqualTo || f instanceof In)) {
            partitions = intersect(partitions, values(f), Integer.class);
        } else if ("offset".equals(column) && bound(f)) {
            used.add(f);
            return;
        } else {
            return;
        }
        used.add(f);
    }

    private static Object[] values(Filter f) {
        return f instanceof EqualTo ? new Object[] {((EqualTo) f).value()} : ((In) f).values();
    }

    private static <T> Set<T> intersect(Set<T> current, Object[] values, Class<T> type) {
        Set<T> given = new HashSet<>();
        for (Object v : values) {
            if (type.isInstance(v)) {
                given.add(type.cast(v));
            }
        }
        if (current != null) {
            given.retainAll(current);
        }
        return given;
    }

    /** Narrows [low, high] by a comparison of offset with a long; false when it is none. */
    private boolean bound(Filter f) {
        Object v = f instanceof EqualTo ? ((EqualTo) f).value() : f instanceof GreaterThan ? ((GreaterThan) f).value()
            : f instanceof GreaterThanOrEqual ? ((GreaterThanOrEqual) f).value() : f instanceof LessThan
            ? ((LessThan) f).value() : f instanceof LessThanOrEqual ? ((LessThanOrEqual) f).value() : null;
        if (!(v instanceof Long)) {
            return false;
        }
        long x = (Long) v;
        if (f instanceof EqualTo) {
            low = Math.max(low, x);
            high = Math.min(high, x);
        } else if (f instanceof GreaterThan) {
            low = x == Long.MAX_VALUE ? x : Math.max(low, x + 1);
            high = x == Long.MAX_VALUE ? Long.MIN_VALUE : high;
        } else if (f instanceof GreaterThanOrEqual) {
            low = Math.max(low, x);
        } else if (f instanceof LessThan) {
            high = x == Long.MIN_VALUE ? x : Math.min(high, x - 1);
            low = x == Long.MIN_VALUE ? Long.MAX_VALUE : low;
        } else {
            high = Math.min(high, x);
        }
        return true;
    }

    /** Whether a split of this segment (base offset `base`, the next segment's `next`, -1: none) can hold rows kept. */
    boolean keeps(SegmentSplit s, long next) {
        if ((topics != null && !topics.contains(s.topic)) || (partitions != null && !partitions.contains(s.partition))) {
            return false;
        }
        return low <= high && SegmentPlan.holds(s.segment, next, low, high);
    }
}
