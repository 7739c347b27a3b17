#include "kb_isolation.h"

#include <stdlib.h>
#include <string.h>

#include "kb_control.h"
#include "kb_kafka.h"

/* -- a small set of producer ids, kept ascending (a read rarely has more than a few aborted) -- */

static int32_t set_find(const kb_producer_set *s, int64_t id, int *found)
{
    int32_t lo = 0, hi = s->count;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (s->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < s->count && s->ids[lo] == id;
    return lo;
}

static int set_has(const kb_producer_set *s, int64_t id)
{
    int found;
    set_find(s, id, &found);
    return found;
}

static int set_add(kb_producer_set *s, int64_t id)
{
    int found;
    int32_t at = set_find(s, id, &found);
    if (found)
        return 0;
    if (s->count == s->cap) {
        int32_t cap = s->cap ? (s->cap > INT32_MAX / 2 ? INT32_MAX : s->cap * 2) : 8;
        if (cap == s->count)
            return -1;
        int64_t *ids = realloc(s->ids, (size_t)cap * sizeof *ids);
        if (!ids)
            return -1;
        s->ids = ids;
        s->cap = cap;
    }
    memmove(s->ids + at + 1, s->ids + at, (size_t)(s->count - at) * sizeof *s->ids);
    s->ids[at] = id;
    s->count++;
    return 0;
}

static void set_remove(kb_producer_set *s, int64_t id)
{
    int found;
    int32_t at = set_find(s, id, &found);
    if (found) {
        memmove(s->ids + at, s->ids + at + 1, (size_t)(s->count - at - 1) * sizeof *s->ids);
        s->count--;
    }
}

/* -- the state ------------------------------------------------------------------------------ */

static int by_first_offset(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

int kb_isolation_init(kb_isolation *iso, int committed, const int64_t *last_stable_offset, const int64_t *pairs,
                      int32_t n)
{
    memset(iso, 0, sizeof *iso);
    iso->committed = committed != 0;
    iso->bounded = committed && last_stable_offset;
    iso->last_stable_offset = iso->bounded ? *last_stable_offset : 0;
    if (!committed || n <= 0 || !pairs)
        return 0;
    iso->pending = malloc((size_t)n * 2 * sizeof *iso->pending);
    if (!iso->pending)
        return -1;
    memcpy(iso->pending, pairs, (size_t)n * 2 * sizeof *iso->pending);
    qsort(iso->pending, (size_t)n, 2 * sizeof *iso->pending, by_first_offset);
    iso->pending_count = n;
    return 0;
}

void kb_isolation_free(kb_isolation *iso)
{
    free(iso->pending);
    free(iso->aborted.ids);
    free(iso->undecided.ids);
    memset(iso, 0, sizeof *iso);
}

int kb_isolation_past_end(const kb_isolation *iso, int64_t base_offset)
{
    return iso->bounded && base_offset >= iso->last_stable_offset;
}

int kb_isolation_reads_marker(const kb_isolation *iso, int64_t producer_id, int control)
{
    return iso->committed && producer_id >= 0 && control;
}

/* The aborted transactions that began at or before `offset` put their producer in the aborted set
 * (a new aborted transaction decides an undecided producer: it is aborted). */
static int begin_aborted_up_to(kb_isolation *iso, int64_t offset)
{
    while (iso->next_pending < iso->pending_count && iso->pending[2 * iso->next_pending] <= offset) {
        int64_t producer = iso->pending[2 * iso->next_pending + 1];
        iso->next_pending++;
        if (set_add(&iso->aborted, producer) != 0)
            return -1;
        set_remove(&iso->undecided, producer);
    }
    return 0;
}

int kb_isolation_decide(kb_isolation *iso, int64_t producer_id, int64_t last_offset, int control, int transactional,
                        int abort_marker)
{
    if (iso->committed && producer_id >= 0) {
        if (begin_aborted_up_to(iso, last_offset) != 0)
            return KB_ISO_NO_MEMORY;
        if (control) {
            /* an ABORT ends the aborted transaction; any marker of an undecided producer says the
             * unreadable entry had ended it (an aborted transaction never commits) */
            if (abort_marker > 0 || set_has(&iso->undecided, producer_id))
                set_remove(&iso->aborted, producer_id);
            set_remove(&iso->undecided, producer_id);
        } else if (transactional && set_has(&iso->undecided, producer_id)) {
            return KB_ISO_HOLD;
        } else if (transactional && set_has(&iso->aborted, producer_id)) {
            return KB_ISO_DROP;
        }
    }
    return control ? KB_ISO_DROP : KB_ISO_KEEP;
}

int kb_isolation_unreadable(kb_isolation *iso, int64_t last_offset)
{
    if (!iso->committed)
        return 0;
    if (begin_aborted_up_to(iso, last_offset) != 0)
        return -1;
    for (int32_t i = 0; i < iso->aborted.count; i++)
        if (set_add(&iso->undecided, iso->aborted.ids[i]) != 0)
            return -1;
    return 0;
}

int kb_isolation_add_undecided(kb_isolation *iso, const int64_t *producers, int32_t n)
{
    for (int32_t i = 0; iso->committed && i < n; i++)
        if (set_add(&iso->undecided, producers[i]) != 0)
            return -1;
    return 0;
}

int kb_isolation_settle(kb_isolation *iso, const int64_t *aborted, int32_t n, int64_t next_offset)
{
    while (iso->next_pending < iso->pending_count && iso->pending[2 * iso->next_pending] < next_offset)
        iso->next_pending++;
    iso->aborted.count = 0;
    for (int32_t i = 0; i < n; i++)
        if (set_add(&iso->aborted, aborted[i]) != 0)
            return -1;
    return 0;
}

int kb_isolation_abort_marker(const uint8_t *buf, size_t start, size_t limit, const kb_v2_header *h)
{
    if (h->record_count <= 0)
        return 0;
    kb_record r;
    kb_fault f;
    size_t next;
    int type;
    if (kb_v2_read_record(buf, start, limit, &r, &f, &next) != 0 ||
        kb_control_key(buf + r.key, r.key_len, r.key, &type, &f) != 0)
        return -1;
    return type == KB_CONTROL_ABORT;
}
