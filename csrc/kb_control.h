/* Control records (a control batch's one record): the key's type, a transaction marker's
 * value, read with the checks of Kafka's ControlRecordType.parse and EndTransactionMarker. */
#ifndef KB_CONTROL_H
#define KB_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "kb_v2.h"

#define KB_CONTROL_KEY_SIZE 4    /* int16 version, int16 type */
#define KB_CONTROL_MARKER_SIZE 6 /* int16 version, int32 coordinator epoch */

/* The type of a control key `key[0, len)` (len < 0: null) at byte `pos`: 0 with *type (-1 for a
 * type Kafka does not know), or -1 with the fault. */
int kb_control_key(const uint8_t *key, int32_t len, size_t pos, int *type, kb_fault *f);

/* The coordinator epoch of an ABORT / COMMIT marker's value: 0, or -1 with the fault. */
int kb_control_marker(const uint8_t *value, int32_t len, size_t pos, int32_t *coordinator_epoch, kb_fault *f);

#endif
