#include "kb_ranges.h"

#include "kb_legacy.h"
#include "kb_wire.h"

int kb_ranges_keeps_entry(const kb_ranges *r, const uint8_t *buf, const kb_entry *e, int records,
                          const kb_decode_opts *o)
{
    kb_fault f;
    int64_t first, last, max_timestamp, first_timestamp;
    if (e->magic >= 2) {
        kb_v2_header h;
        if (kb_v2_check_entry(buf, e->pos, e->size, 0, &h, &f) != 0)
            return 1;
        first = h.base_offset;
        last = kb_wrap_add64(h.base_offset, h.last_offset_delta);
        max_timestamp = h.max_timestamp;
        first_timestamp = h.base_timestamp;
    } else {
        kb_legacy_msg m;
        if (kb_legacy_read(buf, e->pos, e->size, &m, &f) != 0)
            return 1;
        first = last = m.offset;
        max_timestamp = first_timestamp = m.timestamp;
        /* a compressed wrapper's own timestamp bounds its records' only under LogAppendTime (they
         * take it); under CreateTime a producer may write anything there (librdkafka: 0): its
         * records are read and filtered one by one (kb_ranges_keeps_record) */
        if (records && m.magic > 0 && (m.attributes & KB_ATTR_CODEC_MASK) != KB_CODEC_NONE &&
            !(m.attributes & KB_ATTR_LOG_APPEND_TIME)) {
            max_timestamp = INT64_MAX;
            first_timestamp = INT64_MIN;
        }
        /* only the end bound needs a wrapper's first offset: decompressed only then */
        if ((r->bounds & KB_RANGE_END_OFFSET) && (m.attributes & KB_ATTR_CODEC_MASK) != KB_CODEC_NONE &&
            kb_decode_legacy_first_offset(buf, e, o, &first, &f) != 0)
            return 1;
    }
    if (((r->bounds & KB_RANGE_FIRST_OFFSET) && last < r->first_offset) ||
        ((r->bounds & KB_RANGE_END_OFFSET) && first >= r->end_offset) ||
        ((r->bounds & KB_RANGE_FIRST_TIMESTAMP) && max_timestamp < r->first_timestamp))
        return 0;
    return records || !(r->bounds & KB_RANGE_END_TIMESTAMP) || first_timestamp < r->end_timestamp;
}
