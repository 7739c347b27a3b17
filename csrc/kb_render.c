#include "kb_render.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Appends to a bounded buffer, counting what did not fit too (snprintf's contract). */
typedef struct {
    char *out;
    size_t cap, len;
} sink;

static void put(sink *s, const char *text, size_t n)
{
    if (s->len + 1 < s->cap) {
        size_t room = s->cap - 1 - s->len;
        memcpy(s->out + s->len, text, n < room ? n : room);
    }
    s->len += n;
}

static void put_str(sink *s, const char *text)
{
    put(s, text, strlen(text));
}

static void put_int(sink *s, int64_t v)
{
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%" PRId64, v);
    put(s, digits, (size_t)n);
}

static int names_field(const kb_rule_info *r)
{
    return strstr(r->template_text, "{field}") != NULL || strstr(r->detail, "{field}") != NULL;
}

/* LegacyRecordBatch.toString, as it appears inside Kafka's validator messages. */
static void put_legacy_record(sink *s, const int64_t a[8])
{
    int64_t magic = a[1], attributes = a[3], codec = attributes & 7;
    put_str(s, "LegacyRecordBatch(offset=");
    put_int(s, a[0]);
    put_str(s, ", Record(magic=");
    put_int(s, magic);
    put_str(s, ", attributes=");
    put_int(s, attributes);
    put_str(s, ", compression=");
    if (codec < KB_CODEC_COUNT)
        put_str(s, kb_codec_names[codec]);
    else
        put_int(s, codec);
    put_str(s, ", crc=");
    put_int(s, a[4]);
    if (magic > 0) {
        put_str(s, ", ");
        put_str(s, kb_timestamp_type_names[(attributes >> 3) & 1]);
        put_str(s, "=");
        put_int(s, a[7]);
    }
    put_str(s, ", key=");
    put_int(s, a[5] > 0 ? a[5] : 0);
    put_str(s, " bytes, value=");
    put_int(s, a[6] > 0 ? a[6] : 0);
    put_str(s, " bytes))");
}

static int field(sink *s, const kb_rule_info *r, const char *name, size_t n, const int64_t a[8], const char *tp)
{
    if (n == 2 && name[0] == 'a' && name[1] >= '0' && name[1] <= '7')
        put_int(s, a[name[1] - '0']);
    else if (n == 2 && memcmp(name, "tp", 2) == 0)
        put_str(s, tp);
    else if (n == 5 && memcmp(name, "field", 5) == 0) {
        if (names_field(r) && a[0] >= 0 && a[0] < KB_FIELD_COUNT)
            put_str(s, kb_field_names[a[0]]);
    } else if (n == 6 && memcmp(name, "record", 6) == 0)
        put_legacy_record(s, a);
    else if (n == 12 && memcmp(name, "record_class", 12) == 0)
        /* DefaultRecord prints null as 0 bytes; the compressed in-place path's partial reader prints -1 */
        put_str(s, a[4] ? "PartialDefaultRecord" : "DefaultRecord");
    else
        return -1;
    return 0;
}

long kb_render(kb_rule rule, kb_text which, const int64_t args[8], const char *tp, char *out, size_t cap)
{
    if ((unsigned)rule >= KB_RULE_COUNT)
        return -1;
    const kb_rule_info *r = &kb_rule_table[rule];
    const char *t = which == KB_TEXT_DETAIL                             ? r->detail
                    : which == KB_TEXT_READER && r->reader_template[0] ? r->reader_template
                                                                        : r->template_text;
    sink s = {out, cap, 0};
    for (const char *p = t; *p;) {
        const char *open = strchr(p, '{');
        if (!open) {
            put_str(&s, p);
            break;
        }
        put(&s, p, (size_t)(open - p));
        const char *close = strchr(open, '}');
        if (!close || field(&s, r, open + 1, (size_t)(close - open - 1), args, tp) != 0)
            return -1;
        p = close + 1;
    }
    if (cap)
        out[s.len < cap ? s.len : cap - 1] = '\0';
    return (long)s.len;
}
