#include "kb_control.h"

#include "kb_kafka.h"
#include "kb_wire.h"

/* A control key or marker value: at least `need` bytes (len < 0: null), an int16 version >= 0
 * first; 0, or -1 with the fault of `size_rule` / `version_rule`. */
static int versioned(const uint8_t *p, int32_t len, size_t pos, int32_t need, kb_rule size_rule, kb_rule version_rule,
                     kb_fault *f)
{
    if (len < need) {
        kb_fault_set(f, size_rule, pos, need, len < 0 ? 0 : len, 0);
        return -1;
    }
    int16_t version = (int16_t)kb_load_be16(p);
    if (version < 0) {
        kb_fault_set(f, version_rule, pos, version, 0, 0);
        return -1;
    }
    return 0;
}

int kb_control_key(const uint8_t *key, int32_t len, size_t pos, int *type, kb_fault *f)
{
    if (versioned(key, len, pos, KB_CONTROL_KEY_SIZE, KB_RULE_CONTROL_KEY_SIZE, KB_RULE_CONTROL_KEY_VERSION, f) != 0)
        return -1;
    int16_t id = (int16_t)kb_load_be16(key + 2);
    *type = id >= 0 && id < KB_CONTROL_COUNT ? id : -1;
    return 0;
}

int kb_control_marker(const uint8_t *value, int32_t len, size_t pos, int32_t *coordinator_epoch, kb_fault *f)
{
    if (versioned(value, len, pos, KB_CONTROL_MARKER_SIZE, KB_RULE_CONTROL_MARKER_SIZE,
                  KB_RULE_CONTROL_MARKER_VERSION, f) != 0)
        return -1;
    *coordinator_epoch = (int32_t)kb_load_be32(value + 2);
    return 0;
}
