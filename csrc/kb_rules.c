#include "kb_rules.h"

const kb_rule_info kb_rule_table[KB_RULE_COUNT] = {
#define KB_RULE(name, id, error, stage, flags, template, detail, reader) \
    [KB_RULE_##name] = {id, KB_##error, stage, flags, template, detail, reader},
#include "kb_rules.def"
#undef KB_RULE
};

const char *const kb_field_names[KB_FIELD_COUNT] = {
#define KB_FIELD_NAME(name, text) [KB_FIELD_##name] = text,
    KB_RECORD_FIELDS(KB_FIELD_NAME)
#undef KB_FIELD_NAME
};

int16_t kb_rule_code(kb_rule rule)
{
    return (unsigned)rule < KB_RULE_COUNT ? kb_rule_table[rule].code : KB_UNKNOWN_SERVER_ERROR;
}
