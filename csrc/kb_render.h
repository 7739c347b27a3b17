/* A rule's message from the core's values for one fault: the catalogue's templates
 * (kb_rules.def) filled in one place, so every host -- Python, the JVM -- prints the same words.
 */
#ifndef KB_RENDER_H
#define KB_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "kb_rules.h"

typedef enum {
    KB_TEXT_MESSAGE = 0, /* Kafka's message (the template) */
    KB_TEXT_DETAIL = 1,  /* what pykbatch adds */
    KB_TEXT_READER = 2,  /* Kafka's client-side reader's message where it has its own, else the template */
} kb_text;

/* Writes the text of `rule` for the fault's `args` (8 values; a fault with fewer gives zeros) and
 * the topic-partition `tp` (NUL-terminated) into out[0, cap) NUL-terminated, cut at cap - 1.
 * Fields: {a0}..{a7}, {tp}, {field} (the record field a0 names, empty when the rule names none
 * or a0 is out of range), {record} (a legacy record as Kafka's toString prints it, from
 * a0 offset, a1 magic, a3 attributes, a4 crc, a5 key length, a6 value length, a7 timestamp),
 * {record_class}.  Returns the text's full length, or -1 when a template names a field outside
 * these (a rule checked in Python, which fills its own fields). */
long kb_render(kb_rule rule, kb_text which, const int64_t args[8], const char *tp, char *out, size_t cap);

#endif
