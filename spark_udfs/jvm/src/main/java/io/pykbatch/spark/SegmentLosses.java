package io.pykbatch.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * What one validated split of a segment cannot deliver, each range a row of its own: the JVM
 * reader's account, step for step pykbatch.log.split_truth's (the Python reader's), from what the
 * core's walk kept (kb_log_account: the spans it passed over with the offsets around them, each
 * window's entries with the offsets before them) and the validator's culprits of each window
 * validated with the bytes before it and the previous window's last entry.
 */
final class SegmentLosses {
    // kb_jni.c's layouts: a skipped span (SK_*), a window's entry (EN_*), the account's state (ST_*)
    static final int SK_POS = 0, SK_SIZE = 1, SK_RULE = 2, SK_ARGS = 3, SK_TOP_BEFORE = 6, SK_NEXT_FIRST = 7,
        SK_WIDTH = 8;
    static final int EN_POS = 0, EN_SIZE = 1, EN_FIRST = 2, EN_LAST = 3, EN_TOP_BEFORE = 4, EN_LAST_BEFORE = 5,
        EN_RULE = 6, EN_ARGS = 7, EN_WIDTH = 10;
    static final int ST_TOP = 0, ST_BEFORE_POS = 1, ST_LAST = 2, ST_REACHED_END = 3, ST_VALID_BYTES = 4,
        ST_PAST_END = 5, ST_FIRST = 6, ST_SHRUNK_FROM = 7, ST_SIZE = 8;
    static final long NONE = Long.MIN_VALUE, AT_END = Long.MIN_VALUE + 1;  // kb_log_windows.h KB_LOG_*

    private static final int GAP = rule("log.offset_gap"), TRUNCATED = rule("log.segment_truncated"),
        SHRANK = rule("log.file_shrank");

    /** A range no row delivers (pykbatch.log.split_truth.Unreadable): size bytes from position (0:
     * offsets missing with no bytes left of them), the offsets it hides (NONE: not known), its rule. */
    static final class Unreadable {
        final long position, size, first, last;
        final int rule, code;
        final UTF8String message;

        Unreadable(long position, long size, long first, long last, int rule, int code, UTF8String message) {
            this.position = position;
            this.size = size;
            this.first = first;
            this.last = last;
            this.rule = rule;
            this.code = code;
            this.message = message;
        }
    }

    private final Validator validator;
    private final SegmentSplit split;
    private final long fileSize;
    private final boolean compacted;
    private long overlap;      // the previous window's last entry, validated again (NONE: none)
    private long covered;      // bytes up to here are in a window or named
    private long named = -1;   // the highest offset a range named so far hides
    private boolean first = true;
    private final List<long[]> skips = new ArrayList<>();

    SegmentLosses(Validator validator, SegmentSplit split, long fileSize, boolean compacted, long[] state) {
        this.validator = validator;
        this.split = split;
        this.fileSize = fileSize;
        this.compacted = compacted;
        this.overlap = split.start > 0 ? state[ST_BEFORE_POS] : NONE;
        this.covered = split.start;
    }

    private static int rule(String id) {
        return java.util.Arrays.asList(Native.RULE_IDS).indexOf(id);
    }

    private static String stage(int rule) {
        return Native.ruleText(rule, true);
    }

    /** The culprits of a window of entries ([lo, hi) of the segment mapped at `base`; `entries` its
     * entries as the account read them, `taken` the spans handed out with it), each entry's first
     * culprit into `verdicts`, and the ranges before or inside it that no row delivers. */
    List<Unreadable> window(long base, long lo, long hi, long[] entries, long[] taken, long state[],
                            Validator.Culprit[] verdicts) {
        addSkips(taken);
        List<Validator.Culprit> culprits = culprits(base, hi, state);
        Map<Long, Integer> at = new HashMap<>();
        for (int k = 0; k * EN_WIDTH < entries.length; k++) {
            at.put(entries[k * EN_WIDTH + EN_POS], k);
        }
        List<Unreadable> gaps = new ArrayList<>();
        for (Validator.Culprit c : culprits) {
            Integer k = at.get(c.entryPosition);
            if (c.rule == GAP && c.entryPosition >= lo) {
                Unreadable gap = gap(c, k == null ? null : entries, k == null ? 0 : k);
                if (gap != null) {
                    gaps.add(gap);
                }
            } else if (k != null && verdicts[k] == null) {
                verdicts[k] = c;
            }
        }
        List<Unreadable> out = spansBefore(lo, culprits, state);
        out.addAll(gaps);
        saw(out);
        overlap = entries[(entries.length / EN_WIDTH - 1) * EN_WIDTH + EN_POS];
        covered = hi;
        first = false;
        return out;
    }

    /** An entry of the last window whose records do not decode: every offset its header names. */
    Unreadable undecoded(long[] entries, int k, Validator.Culprit culprit) {
        int at = k * EN_WIDTH;
        Unreadable u;
        if (culprit != null) {  // a v0/v1 wrapper whose records do not read: its first from the validator
            long first = entries[at + EN_FIRST] != NONE ? entries[at + EN_FIRST] : culprit.firstOffset;
            u = new Unreadable(entries[at + EN_POS], entries[at + EN_SIZE], first, entries[at + EN_LAST],
                culprit.rule, culprit.code, culprit.message);
        } else {
            int rule = (int) entries[at + EN_RULE];
            u = new Unreadable(entries[at + EN_POS], entries[at + EN_SIZE], entries[at + EN_FIRST],
                entries[at + EN_LAST], rule, code(rule), validator.render(rule, args(entries, at + EN_ARGS)));
        }
        saw(List.of(u));
        return u;
    }

    /** What the split leaves unnamed once read (the segment mapped at `base`; `state` the account's
     * at the walk's end): spans after its last window, and where it ends its segment, what the
     * partition shows there. */
    List<Unreadable> finish(long base, long[] taken, long[] state) {
        addSkips(taken);
        List<Unreadable> out = new ArrayList<>();
        if (!skips.isEmpty()) {
            long resume = 0;
            for (long[] s : skips) {
                resume = Math.max(resume, s[SK_POS] + s[SK_SIZE]);
            }
            out = spansBefore(resume, culprits(base, resume, state), state);
            saw(out);
        }
        if (state[ST_REACHED_END] == 0) {
            return out;
        }
        long valid = state[ST_VALID_BYTES];
        long top = state[ST_TOP];
        long through = Math.max(top != NONE ? top : split.segment - 1, named);
        if (state[ST_SHRUNK_FROM] > 0 && valid < state[ST_SHRUNK_FROM]) {  // cut or deleted while read
            long from = state[ST_SHRUNK_FROM];
            out.add(new Unreadable(valid, from - valid, top != NONE ? top + 1 : NONE, NONE, SHRANK, code(SHRANK),
                validator.render(SHRANK, new long[] {from, state[ST_SIZE], valid})));
        } else if (valid < fileSize && split.next >= 0) {  // a closed segment cut short (truth.truncated_segment)
            long last = top != NONE ? top : split.segment - 1;
            long lostFirst = last + 1, lostLast = split.next - 1;
            String lost = split.next > last + 1 ? "offsets " + (last + 1) + " to " + (split.next - 1) + " are lost"
                : "no offset is missing after it (the next segment goes on from its last)";
            if (lostLast < lostFirst) {
                lostFirst = lostLast = NONE;
            }
            String message = Native.ruleText(TRUNCATED, false).replace("{segment}", fileName(split.path))
                .replace("{position}", String.valueOf(valid)).replace("{size}", String.valueOf(fileSize - valid))
                .replace("{lost}", lost);
            out.add(new Unreadable(valid, fileSize - valid, lostFirst, lostLast, TRUNCATED, code(TRUNCATED),
                UTF8String.fromString(message)));
        } else if (!compacted && split.next >= 0 && valid >= fileSize && through + 1 < split.next) {
            // nothing read or named up to the next segment's base offset (truth.segment_gap)
            long from = through + 1;
            out.add(new Unreadable(fileSize, 0, from, split.next - 1, GAP, code(GAP),
                validator.render(GAP, new long[] {from, split.next - 1, split.next, from - 1})));
        }
        return out;
    }

    // -- helpers ---------------------------------------------------------------------------------

    private void addSkips(long[] taken) {
        for (int i = 0; i * SK_WIDTH < taken.length; i++) {
            skips.add(java.util.Arrays.copyOfRange(taken, i * SK_WIDTH, (i + 1) * SK_WIDTH));
        }
    }

    private void saw(List<Unreadable> ranges) {
        for (Unreadable u : ranges) {
            if (u.last != NONE) {
                named = Math.max(named, u.last);
            }
        }
    }

    private static int code(int rule) {
        return Native.RULE_CODES[rule];
    }

    private static long[] args(long[] from, int at) {
        return new long[] {from[at], from[at + 1], from[at + 2], 0, 0, 0, 0, 0};
    }

    private static String fileName(String path) {
        int slash = path.lastIndexOf('/');
        return slash < 0 ? path : path.substring(slash + 1);
    }

    /** The validator's culprits of the bytes from the previous window's last entry (or what is not
     * yet covered) to hi, placed in the segment; those of that entry left out (its window named
     * them).  The split's first window at the segment's start also names the offsets between the
     * segment's base offset and its first entry, where a segment precedes it. */
    private List<Validator.Culprit> culprits(long base, long hi, long[] state) {
        long from = overlap != NONE ? overlap : covered;
        List<Validator.Culprit> out = new ArrayList<>();
        for (Validator.Culprit c : validator.windowCulprits(base + from, hi - from)) {
            Validator.Culprit placed = new Validator.Culprit(c.entry, c.entryPosition + from, c.rule, c.code,
                c.message, c.firstOffset, c.lastOffset, c.args);
            if (overlap == NONE || placed.entryPosition != overlap) {
                out.add(placed);
            }
        }
        long firstOffset = state[ST_FIRST];
        if (split.start == 0 && split.follows && !compacted && first && overlap == NONE && firstOffset != NONE
                && firstOffset > split.segment && skips.isEmpty()) {
            out.add(0, new Validator.Culprit(-1, split.start, GAP, code(GAP), validator.render(GAP, new long[] {
                split.segment, firstOffset - 1, firstOffset, split.segment - 1}), split.segment, firstOffset - 1,
                new long[8]));
        }
        return out;
    }

    /** A gap the window's validator found, from the highest offset the walk of the whole segment had
     * seen before it (`entries`' k-th entry; null: not one of the window's). */
    private Unreadable gap(Validator.Culprit c, long[] entries, int k) {
        long firstOffset = c.firstOffset;
        UTF8String message = c.message;
        long top = entries == null ? NONE : entries[k * EN_WIDTH + EN_TOP_BEFORE];
        long last = entries == null ? NONE : entries[k * EN_WIDTH + EN_LAST_BEFORE];
        if (top != NONE && firstOffset != NONE && top + 1 > firstOffset) {
            firstOffset = top + 1;
            if (firstOffset > c.lastOffset) {
                return null;  // offsets that went backwards before it already hold these
            }
            message = validator.render(GAP, new long[] {firstOffset, c.lastOffset, c.lastOffset + 1,
                last != NONE ? last : top});
        }
        return new Unreadable(c.entryPosition, 0, firstOffset, c.lastOffset, c.rule, c.code, message);
    }

    /** The spans the walk passed over before lo, each named by the validator's culprit at its first
     * byte when that is an entry's fault (its header), else by the walk's own fault; its offsets those
     * between its neighbours. */
    private List<Unreadable> spansBefore(long lo, List<Validator.Culprit> culprits, long[] state) {
        Map<Long, Validator.Culprit> firstAt = new HashMap<>();
        for (Validator.Culprit c : culprits) {
            firstAt.putIfAbsent(c.entryPosition, c);
        }
        List<Unreadable> out = new ArrayList<>();
        while (!skips.isEmpty() && skips.get(0)[SK_POS] < lo) {
            long[] s = skips.remove(0);
            long after = s[SK_NEXT_FIRST];
            if (after == AT_END) {  // nothing read after it: the next segment's base offset bounds it
                after = split.next >= 0 ? split.next : NONE;
            }
            long before = s[SK_TOP_BEFORE];
            long firstOffset = before != NONE ? before + 1 : (s[SK_POS] == 0 ? split.segment : NONE);
            long lastOffset = after != NONE ? after - 1 : NONE;
            Validator.Culprit c = firstAt.get(s[SK_POS]);
            if (c != null && c.rule != GAP && !"framing".equals(stage(c.rule))) {
                out.add(new Unreadable(s[SK_POS], s[SK_SIZE], c.firstOffset != NONE ? c.firstOffset : firstOffset,
                    c.lastOffset != NONE ? c.lastOffset : lastOffset, c.rule, c.code, c.message));
            } else {
                int rule = (int) s[SK_RULE];
                out.add(new Unreadable(s[SK_POS], s[SK_SIZE], firstOffset, lastOffset, rule, code(rule),
                    validator.render(rule, args(s, SK_ARGS))));
            }
        }
        return out;
    }
}
