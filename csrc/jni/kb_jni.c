/* The C core for a JVM host (Spark's executors): io.pykbatch.spark.Native's methods.  The only
 * file that includes jni.h; everything it does is the core's (validation, the verdict, the texts),
 * and what the core leaves to its host -- codecs -- is called back in Java (Decompressor.run).
 *
 * A handle (jlong) owns one set of options, a culprit buffer grown up to the options' cap and a
 * decompression scratch; a handle is used by one thread at a time (Java keeps one per thread). */
#define _GNU_SOURCE /* O_CLOEXEC, madvise under -std=c11 */
#include <errno.h>
#include <fcntl.h>
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kb_avro.h"
#include "kb_crc32c.h"
#include "kb_kafka.h"
#include "kb_legacy.h"
#include "kb_log_windows.h"
#include "kb_ranges.h"
#include "kb_render.h"
#include "kb_rules.h"
#include "kb_v2.h"
#include "kb_validate.h"
#include "kb_repair.h"
#include "kb_resync.h"
#include "kb_verdict.h"
#include "kb_map_guard.h"
#include "kb_unsafe_row.h"

#ifndef KB_JNI_VERSION
#define KB_JNI_VERSION "unknown"
#endif

/* options[] from Java (Options.java writes them in this order) */
enum {
    OPT_ORIGIN, OPT_VERIFY_CRC, OPT_STRICT, OPT_COMPACTED, OPT_LOG_APPEND_TIME, OPT_NOW_MS, OPT_BEFORE_MAX_MS,
    OPT_AFTER_MAX_MS, OPT_MAX_BATCH_BYTES, OPT_MAX_APPEND_BYTES, OPT_TARGET_MAGIC, OPT_TARGET_CODEC,
    OPT_SINGLE_APPEND, OPT_PRODUCE_VERSION, OPT_MAX_CULPRITS, OPT_MAX_DECOMPRESSED, OPT_COUNT
};
/* the summary to Java, in a direct buffer of SUM_COUNT longs (native order) the handle owns a
 * reference to: no array copied per row */
enum {
    SUM_ENTRIES, SUM_RECORDS, SUM_CULPRITS, SUM_VALID_BYTES, SUM_UNWALKED, SUM_TAIL_POS, SUM_TAIL_ENTRY, SUM_STOPPED,
    SUM_STOPPED_AT, SUM_LOST_BYTES, SUM_KEPT, SUM_COUNT
};
/* one culprit to Java: C_WIDTH (18) longs; Validator.java reads the same layout */
enum { C_POS, C_INNER_POS, C_ENTRY_POS, C_ARGS, C_RELATIVE_OFFSET = C_ARGS + 8, C_ENTRY, C_RECORD_INDEX, C_CODE, C_RULE,
       C_FIRST_OFFSET, C_LAST_OFFSET, C_WIDTH };

/* decompression: Java's Decompressor, called with the input as a direct buffer */
typedef struct {
    JNIEnv *env;               /* set while the core may call back */
    jobject decompressor;      /* global ref */
    uint8_t *scratch;          /* max_decompressed bytes, allocated at the first compressed batch */
    jobject scratch_buffer;    /* global ref: a direct ByteBuffer over scratch */
    size_t scratch_cap;
} kb_jvm_codecs;

typedef struct {
    kb_validate_opts opts;
    kb_culprit *out;
    size_t cap, max_cap;
    kb_summary s;
    kb_jvm_codecs codecs;
    uint8_t *input;            /* a copy of the row being validated (Java is called while it is read) */
    size_t input_cap;
    jobject summary_buffer;    /* global ref */
    jlong *summary;            /* its address */
    kb_repair_out repair;      /* kbatch_repair's last row */
    uint8_t *compressed;       /* what Compressor.compress gave last */
    size_t compressed_cap;
} kb_jvm_validator;

static jmethodID run_method;
static jfieldID rule_field, offset_field, message_index_field, produced_field;

static int rule_of(const char *id)
{
    for (int k = 0; k < KB_RULE_COUNT; k++)
        if (strcmp(kb_rule_table[k].id, id) == 0)
            return k;
    return KB_RULE_NONE;
}

/* kb_validate's decompress hook: Decompressor.run(codec, magic, src, scratch) returns the bytes
 * written, or -1 with its fields naming the rule, the offset in src, the message (by index) and
 * the bytes produced before the damage. */
static int decompress(void *ctx, int codec, int magic, const uint8_t *src, size_t n, const uint8_t **out,
                      size_t *out_len, struct kb_fault_s *f)
{
    kb_jvm_codecs *v = ctx;
    JNIEnv *env = v->env;
    *out_len = 0;
    *out = src;
    if (v->scratch == NULL) {
        v->scratch = malloc(v->scratch_cap ? v->scratch_cap : 1);
        jobject local = v->scratch ? (*env)->NewDirectByteBuffer(env, v->scratch, (jlong)v->scratch_cap) : NULL;
        v->scratch_buffer = local ? (*env)->NewGlobalRef(env, local) : NULL;
        if (local)
            (*env)->DeleteLocalRef(env, local);
        if (v->scratch_buffer == NULL) {
            free(v->scratch);
            v->scratch = NULL;
            (*env)->ExceptionClear(env);
            f->rule = (kb_rule)rule_of("batch.decompressed_too_large");
            f->pos = 0;
            memset(f->args, 0, sizeof f->args);
            f->args[0] = -1;  /* no message of the codec's: Java says the scratch could not be had */
            return -1;
        }
    }
    jobject in = (*env)->NewDirectByteBuffer(env, (void *)src, (jlong)n);
    kb_map_guard *guarded = kb_map_guard_suspend();  /* a fault in Java code is the JVM's to answer */
    jint written = in ? (*env)->CallIntMethod(env, v->decompressor, run_method, codec, magic, in, v->scratch_buffer)
                      : -2;
    kb_map_guard_resume(guarded);
    if (in)
        (*env)->DeleteLocalRef(env, in);
    if ((*env)->ExceptionCheck(env)) {  /* Decompressor.run catches its codecs' throwables; this is a VM error */
        (*env)->ExceptionClear(env);
        written = -2;
    }
    if (written >= 0) {
        *out = written ? v->scratch : src;
        *out_len = (size_t)written;
        return 0;
    }
    memset(f->args, 0, sizeof f->args);
    if (written == -2) {
        f->rule = (kb_rule)rule_of("batch.decompression_failed");
        f->pos = 0;
        f->args[0] = -1;
        return -1;
    }
    jstring rule = (*env)->GetObjectField(env, v->decompressor, rule_field);
    const char *id = rule ? (*env)->GetStringUTFChars(env, rule, NULL) : NULL;
    f->rule = (kb_rule)(id ? rule_of(id) : rule_of("batch.decompression_failed"));
    if (id)
        (*env)->ReleaseStringUTFChars(env, rule, id);
    if (rule)
        (*env)->DeleteLocalRef(env, rule);
    f->pos = (*env)->GetLongField(env, v->decompressor, offset_field);
    f->args[0] = (*env)->GetIntField(env, v->decompressor, message_index_field);
    jint produced = (*env)->GetIntField(env, v->decompressor, produced_field);
    if (produced > 0 && (size_t)produced <= v->scratch_cap) {
        *out = v->scratch;
        *out_len = (size_t)produced;
    }
    return -1;
}

static void throw_named(JNIEnv *env, const char *cls, const char *message)
{
    jclass c = (*env)->FindClass(env, cls);
    if (c)
        (*env)->ThrowNew(env, c, message);
}

/* A null array from Java is a NullPointerException, never a read through NULL (which would take
 * the JVM down): every native method taking an array checks it first.  1 when it was null. */
static int null_array(JNIEnv *env, jobject array, const char *what)
{
    if (array != NULL)
        return 0;
    throw_named(env, "java/lang/NullPointerException", what);
    return 1;
}

/* row[off, off + len) copied into *input (grown as needed): the codecs run in Java while a row is
 * read, so it cannot stay pinned.  0, or -1 with an exception pending (bounds, memory). */
static int copy_row(JNIEnv *env, jbyteArray row, jint off, jint len, uint8_t **input, size_t *cap, const char *what)
{
    jsize total = (*env)->GetArrayLength(env, row);
    if (off < 0 || len < 0 || off > total - len) {
        throw_named(env, "java/lang/IndexOutOfBoundsException", "kbatch: row bounds outside its array");
        return -1;
    }
    if ((size_t)len > *cap) {
        uint8_t *grown = realloc(*input, (size_t)len);
        if (grown == NULL) {
            throw_named(env, "java/lang/OutOfMemoryError", what);
            return -1;
        }
        *input = grown;
        *cap = (size_t)len;
    }
    (*env)->GetByteArrayRegion(env, row, off, len, (jbyte *)*input);
    return 0;
}

/* Decompressor's members, looked up once. */
static int find_codec_methods(JNIEnv *env, jobject decompressor)
{
    if (run_method != NULL)
        return 0;
    jclass dc = (*env)->GetObjectClass(env, decompressor);
    run_method = (*env)->GetMethodID(env, dc, "run", "(IILjava/nio/ByteBuffer;Ljava/nio/ByteBuffer;)I");
    rule_field = (*env)->GetFieldID(env, dc, "rule", "Ljava/lang/String;");
    offset_field = (*env)->GetFieldID(env, dc, "offset", "J");
    message_index_field = (*env)->GetFieldID(env, dc, "messageIndex", "I");
    produced_field = (*env)->GetFieldID(env, dc, "produced", "I");
    return run_method && rule_field && offset_field && message_index_field && produced_field ? 0 : -1;
}

static void codecs_free(JNIEnv *env, kb_jvm_codecs *c)
{
    if (c->decompressor)
        (*env)->DeleteGlobalRef(env, c->decompressor);
    if (c->scratch_buffer)
        (*env)->DeleteGlobalRef(env, c->scratch_buffer);
    free(c->scratch);
    memset(c, 0, sizeof *c);
}

JNIEXPORT jstring JNICALL Java_io_pykbatch_spark_Native_version(JNIEnv *env, jclass cls)
{
    (void)cls;
    return (*env)->NewStringUTF(env, KB_JNI_VERSION);
}

JNIEXPORT jlong JNICALL Java_io_pykbatch_spark_Native_open(JNIEnv *env, jclass cls, jlongArray options,
                                                          jobject decompressor, jobject summary)
{
    (void)cls;
    if (null_array(env, options, "kbatch: null options") || null_array(env, decompressor, "kbatch: no codecs") ||
        null_array(env, summary, "kbatch: a null summary buffer"))
        return 0;
    jlong o[OPT_COUNT];
    if ((*env)->GetArrayLength(env, options) != OPT_COUNT)
        return 0;
    jlong *summary_at = (*env)->GetDirectBufferAddress(env, summary);
    if (summary_at == NULL || (*env)->GetDirectBufferCapacity(env, summary) < (jlong)(SUM_COUNT * sizeof(jlong)))
        return 0;
    (*env)->GetLongArrayRegion(env, options, 0, OPT_COUNT, o);
    if (find_codec_methods(env, decompressor) != 0)
        return 0;  /* NoSuchMethodError/NoSuchFieldError pending: Java sees it */
    kb_jvm_validator *v = calloc(1, sizeof *v);
    if (v == NULL)
        return 0;
    v->opts.origin = o[OPT_ORIGIN] ? KB_ORIGIN_LOG : KB_ORIGIN_CLIENT;
    v->opts.verify_crc = (int)o[OPT_VERIFY_CRC];
    v->opts.strict = (int)o[OPT_STRICT];
    v->opts.compacted = (int)o[OPT_COMPACTED];
    v->opts.topic_log_append_time = (int)o[OPT_LOG_APPEND_TIME];
    v->opts.now_ms = o[OPT_NOW_MS];
    v->opts.before_max_ms = o[OPT_BEFORE_MAX_MS];
    v->opts.after_max_ms = o[OPT_AFTER_MAX_MS];
    v->opts.max_batch_bytes = o[OPT_MAX_BATCH_BYTES];
    v->opts.max_append_bytes = o[OPT_MAX_APPEND_BYTES];
    v->opts.target_magic = (int)o[OPT_TARGET_MAGIC];
    v->opts.target_codec = (int)o[OPT_TARGET_CODEC];
    v->opts.single_append = (int)o[OPT_SINGLE_APPEND];
    v->opts.produce_version = (int)o[OPT_PRODUCE_VERSION];
    v->opts.decompress = decompress;
    v->opts.decompress_ctx = &v->codecs;
    v->max_cap = o[OPT_MAX_CULPRITS] < 0 ? 0 : (size_t)o[OPT_MAX_CULPRITS];
    v->cap = v->max_cap < 64 ? v->max_cap : 64;
    v->codecs.scratch_cap = o[OPT_MAX_DECOMPRESSED] < 0 ? 0 : (size_t)o[OPT_MAX_DECOMPRESSED];
    v->out = malloc((v->cap ? v->cap : 1) * sizeof *v->out);
    v->codecs.decompressor = (*env)->NewGlobalRef(env, decompressor);
    v->summary_buffer = (*env)->NewGlobalRef(env, summary);
    v->summary = summary_at;
    if (v->out == NULL || v->codecs.decompressor == NULL || v->summary_buffer == NULL) {
        codecs_free(env, &v->codecs);
        if (v->summary_buffer)
            (*env)->DeleteGlobalRef(env, v->summary_buffer);
        free(v->out);
        free(v);
        return 0;
    }
    return (jlong)(intptr_t)v;
}

JNIEXPORT void JNICALL Java_io_pykbatch_spark_Native_close(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    kb_jvm_validator *v = (kb_jvm_validator *)(intptr_t)handle;
    if (v == NULL)
        return;
    codecs_free(env, &v->codecs);
    if (v->summary_buffer)
        (*env)->DeleteGlobalRef(env, v->summary_buffer);
    free(v->input);
    free(v->out);
    kb_repair_out_free(&v->repair);
    free(v->compressed);
    free(v);
}

/* kb_validate, the culprit buffer grown (up to the cap) until every kept culprit fits. */
static int run(kb_jvm_validator *v, const uint8_t *buf, size_t len)
{
    for (;;) {
        kb_validate_again(buf, len, &v->opts, v->out, v->cap, &v->s);  /* v->s: the last row's */
        if ((size_t)v->s.culprits <= v->cap || v->cap >= v->max_cap)
            return 0;
        size_t cap = (size_t)v->s.culprits < v->max_cap ? (size_t)v->s.culprits : v->max_cap;
        kb_culprit *grown = malloc(cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        free(v->out);
        v->out = grown;
        v->cap = cap;
    }
}

/* Whether an entry the framing walk reaches in buf[0, len) is compressed (its headers only: a
 * few bytes an entry). */
static int has_compressed(const uint8_t *buf, size_t len)
{
    kb_entry e;
    kb_fault f;
    for (size_t pos = 0; kb_next_entry(buf, len, pos, &e, &f) == KB_ENTRY_OK; pos = e.pos + e.size) {
        uint8_t attributes = e.magic >= 2 ? buf[e.pos + KB_V2_AT_ATTRIBUTES + 1] : buf[e.pos + KB_LEGACY_AT_ATTRIBUTES];
        if (attributes & KB_ATTR_CODEC_MASK)
            return 1;
    }
    return 0;
}

/* The last walk's summary (SUM_*) into the handle's summary buffer. */
static void write_summary(kb_jvm_validator *v)
{
    const kb_summary *s = &v->s;
    jlong *out = v->summary;
    out[SUM_ENTRIES] = s->entries;
    out[SUM_RECORDS] = s->records;
    out[SUM_CULPRITS] = s->culprits;
    out[SUM_VALID_BYTES] = s->valid_bytes;
    out[SUM_UNWALKED] = s->unwalked;
    out[SUM_TAIL_POS] = s->tail_pos;
    out[SUM_TAIL_ENTRY] = s->tail_entry;
    out[SUM_STOPPED] = s->stopped;
    out[SUM_STOPPED_AT] = s->stopped_at;
    out[SUM_LOST_BYTES] = s->lost_bytes;
    out[SUM_KEPT] = (jlong)((size_t)s->culprits < v->cap ? (size_t)s->culprits : v->cap);
}

/* Validates buf[off, off + len) at the leader's clock now_ms; writes the summary (SUM_*) to the
 * handle's summary buffer; returns 0, or -1 with an OutOfMemoryError / IndexOutOfBoundsException
 * pending. */
JNIEXPORT jint JNICALL Java_io_pykbatch_spark_Native_validate(JNIEnv *env, jclass cls, jlong handle, jbyteArray buf,
                                                             jint off, jint len, jlong now_ms)
{
    (void)cls;
    if (null_array(env, buf, "kbatch_validate: a null array"))
        return -1;
    kb_jvm_validator *v = (kb_jvm_validator *)(intptr_t)handle;
    jsize total = (*env)->GetArrayLength(env, buf);
    if (off < 0 || len < 0 || off > total - len) {
        jclass oob = (*env)->FindClass(env, "java/lang/IndexOutOfBoundsException");
        if (oob)
            (*env)->ThrowNew(env, oob, "kbatch: row bounds outside its array");
        return -1;
    }
    /* In place (the array pinned: no Java may run meanwhile, so compressed batches are left
     * unwalked) when its entries' headers say nothing is compressed; a row with compressed batches
     * -- said so by its headers, or found by that walk past a framing fault -- is copied out and
     * walked with the codecs. */
    int rc = 0;
    v->opts.now_ms = now_ms;
    void *pinned = (*env)->GetPrimitiveArrayCritical(env, buf, NULL);
    if (pinned == NULL)
        return -1;
    int compressed = has_compressed((const uint8_t *)pinned + off, (size_t)len);
    if (!compressed) {
        kb_decompress_fn codecs = v->opts.decompress;
        v->opts.decompress = NULL;
        rc = run(v, (const uint8_t *)pinned + off, (size_t)len);
        v->opts.decompress = codecs;
    }
    (*env)->ReleasePrimitiveArrayCritical(env, buf, pinned, JNI_ABORT);
    if (rc == 0 && (compressed || v->s.unwalked > 0)) {
        if ((size_t)len > v->input_cap) {
            uint8_t *grown = realloc(v->input, (size_t)len);
            if (grown == NULL)
                rc = -1;
            else {
                v->input = grown;
                v->input_cap = (size_t)len;
            }
        }
        if (rc == 0) {
            (*env)->GetByteArrayRegion(env, buf, off, len, (jbyte *)v->input);
            v->codecs.env = env;
            rc = run(v, v->input, (size_t)len);
            v->codecs.env = NULL;
        }
    }
    if (rc != 0) {
        jclass oom = (*env)->FindClass(env, "java/lang/OutOfMemoryError");
        if (oom)
            (*env)->ThrowNew(env, oom, "kbatch: no memory for the culprits of a row");
        return -1;
    }
    write_summary(v);
    return 0;
}

/* The kept culprits of the last validate, C_WIDTH longs each, into out[] (room for them). */
JNIEXPORT void JNICALL Java_io_pykbatch_spark_Native_culprits(JNIEnv *env, jclass cls, jlong handle, jlongArray out)
{
    (void)cls;
    kb_jvm_validator *v = (kb_jvm_validator *)(intptr_t)handle;
    size_t kept = (size_t)v->s.culprits < v->cap ? (size_t)v->s.culprits : v->cap;
    jsize room = (*env)->GetArrayLength(env, out) / C_WIDTH;
    if ((size_t)room < kept)
        kept = (size_t)room;
    jlong row[C_WIDTH];
    for (size_t i = 0; i < kept; i++) {
        const kb_culprit *c = &v->out[i];
        row[C_POS] = c->pos;
        row[C_INNER_POS] = c->inner_pos;
        row[C_ENTRY_POS] = c->entry_pos;
        for (int k = 0; k < 8; k++)
            row[C_ARGS + k] = c->args[k];
        row[C_RELATIVE_OFFSET] = c->relative_offset;
        row[C_ENTRY] = c->entry;
        row[C_RECORD_INDEX] = c->record_index;
        row[C_CODE] = c->code;
        row[C_RULE] = c->rule;
        row[C_FIRST_OFFSET] = c->first_offset;
        row[C_LAST_OFFSET] = c->last_offset;
        (*env)->SetLongArrayRegion(env, out, (jsize)(i * C_WIDTH), C_WIDTH, row);
    }
}

/* KIP-467's verdict on the last validate's kept culprits: out[0..4] = code, verdict culprit,
 * batch-level, request message, records; out[5..] the error records' first culprits (room: kept). */
JNIEXPORT void JNICALL Java_io_pykbatch_spark_Native_verdict(JNIEnv *env, jclass cls, jlong handle, jintArray out)
{
    (void)cls;
    kb_jvm_validator *v = (kb_jvm_validator *)(intptr_t)handle;
    size_t kept = (size_t)v->s.culprits < v->cap ? (size_t)v->s.culprits : v->cap;
    if ((size_t)(*env)->GetArrayLength(env, out) < 5 + kept)
        return;
    int32_t *firsts = malloc((kept ? kept : 1) * sizeof *firsts);
    if (firsts == NULL)
        return;
    kb_verdict verdict;
    kb_verdict_of(v->out, kept, v->opts.origin, v->opts.produce_version, &verdict, firsts);
    jint head[5] = {verdict.code, verdict.verdict, verdict.batch_level, verdict.request_message,
                    (jint)(verdict.batch_level ? 0 : verdict.records)};
    (*env)->SetIntArrayRegion(env, out, 0, 5, head);
    if (!verdict.batch_level && verdict.records)
        (*env)->SetIntArrayRegion(env, out, 5, (jsize)verdict.records, (const jint *)firsts);
    free(firsts);
}

static jbyteArray utf8(JNIEnv *env, const char *text, long n)
{
    jbyteArray out = (*env)->NewByteArray(env, (jsize)n);
    if (out)
        (*env)->SetByteArrayRegion(env, out, 0, (jsize)n, (const jbyte *)text);
    return out;
}

/* A rule's text (kb_text `which`) for the culprit at culprits[at..] (its C_ARGS), UTF-8; null when
 * the template names fields only Python fills. */
JNIEXPORT jbyteArray JNICALL Java_io_pykbatch_spark_Native_render(JNIEnv *env, jclass cls, jint rule, jint which,
                                                                 jlongArray culprits, jint at, jbyteArray tp)
{
    (void)cls;
    if (rule < 0 || rule >= KB_RULE_COUNT || at < 0 || at > (*env)->GetArrayLength(env, culprits) - C_WIDTH)
        return NULL;
    int64_t args[8];
    (*env)->GetLongArrayRegion(env, culprits, at + C_ARGS, 8, (jlong *)args);
    jsize tp_len = (*env)->GetArrayLength(env, tp);
    char *name = malloc((size_t)tp_len + 1);
    if (name == NULL)
        return NULL;
    (*env)->GetByteArrayRegion(env, tp, 0, tp_len, (jbyte *)name);
    name[tp_len] = 0;
    char small[1024];
    long n = kb_render((kb_rule)rule, (kb_text)which, args, name, small, sizeof small);
    jbyteArray out = NULL;
    if (n >= 0 && (size_t)n < sizeof small) {
        out = utf8(env, small, n);
    } else if (n >= 0) {
        char *big = malloc((size_t)n + 1);
        if (big) {
            kb_render((kb_rule)rule, (kb_text)which, args, name, big, (size_t)n + 1);
            out = utf8(env, big, n);
            free(big);
        }
    }
    free(name);
    return out;
}

/* KIP-467's error_message of a batch refused record by record (kb_render_record_errors). */
JNIEXPORT jbyteArray JNICALL Java_io_pykbatch_spark_Native_recordErrors(JNIEnv *env, jclass cls, jint code,
                                                                       jint records, jintArray indexes,
                                                                       jobjectArray messages)
{
    (void)cls;
    jsize shown = (*env)->GetArrayLength(env, indexes);
    if (shown > 3 || shown > records || (*env)->GetArrayLength(env, messages) < shown)
        return NULL;
    int32_t idx[3];
    const char *texts[3] = {"", "", ""};
    char *owned[3] = {NULL, NULL, NULL};
    (*env)->GetIntArrayRegion(env, indexes, 0, shown, (jint *)idx);
    jbyteArray out = NULL;
    for (jsize i = 0; i < shown; i++) {
        jbyteArray m = (*env)->GetObjectArrayElement(env, messages, i);
        jsize n = m ? (*env)->GetArrayLength(env, m) : 0;
        owned[i] = malloc((size_t)n + 1);
        if (owned[i] == NULL)
            goto done;
        if (m)
            (*env)->GetByteArrayRegion(env, m, 0, n, (jbyte *)owned[i]);
        owned[i][n] = 0;
        texts[i] = owned[i];
        if (m)
            (*env)->DeleteLocalRef(env, m);
    }
    long n = kb_render_record_errors((int16_t)code, (size_t)records, idx, texts, NULL, 0);
    char *text = malloc((size_t)n + 1);
    if (text) {
        kb_render_record_errors((int16_t)code, (size_t)records, idx, texts, text, (size_t)n + 1);
        out = utf8(env, text, n);
        free(text);
    }
done:
    for (int i = 0; i < 3; i++)
        free(owned[i]);
    return out;
}

/* The catalogue for Java: every rule's id, Kafka error code and flags; every error code's name. */
JNIEXPORT jobjectArray JNICALL Java_io_pykbatch_spark_Native_ruleIds(JNIEnv *env, jclass cls)
{
    (void)cls;
    jclass string = (*env)->FindClass(env, "java/lang/String");
    jobjectArray out = string ? (*env)->NewObjectArray(env, KB_RULE_COUNT, string, NULL) : NULL;
    for (int k = 0; out && k < KB_RULE_COUNT; k++) {
        jstring id = (*env)->NewStringUTF(env, kb_rule_table[k].id);
        (*env)->SetObjectArrayElement(env, out, k, id);
        (*env)->DeleteLocalRef(env, id);
    }
    return out;
}

JNIEXPORT jintArray JNICALL Java_io_pykbatch_spark_Native_ruleFlags(JNIEnv *env, jclass cls)
{
    (void)cls;
    jint flags[KB_RULE_COUNT];
    for (int k = 0; k < KB_RULE_COUNT; k++)
        flags[k] = (jint)kb_rule_table[k].flags;
    jintArray out = (*env)->NewIntArray(env, KB_RULE_COUNT);
    if (out)
        (*env)->SetIntArrayRegion(env, out, 0, KB_RULE_COUNT, flags);
    return out;
}

/* A rule's message template (its fields named in braces: the rules the host words itself), or its
 * stage (`stage` true). */
JNIEXPORT jstring JNICALL Java_io_pykbatch_spark_Native_ruleText(JNIEnv *env, jclass cls, jint rule, jboolean stage)
{
    (void)cls;
    if (rule < 0 || rule >= KB_RULE_COUNT)
        return NULL;
    return (*env)->NewStringUTF(env, stage ? kb_rule_table[rule].stage : kb_rule_table[rule].template_text);
}

JNIEXPORT jintArray JNICALL Java_io_pykbatch_spark_Native_ruleCodes(JNIEnv *env, jclass cls)
{
    (void)cls;
    jint codes[KB_RULE_COUNT];
    for (int k = 0; k < KB_RULE_COUNT; k++)
        codes[k] = kb_rule_table[k].code;
    jintArray out = (*env)->NewIntArray(env, KB_RULE_COUNT);
    if (out)
        (*env)->SetIntArrayRegion(env, out, 0, KB_RULE_COUNT, codes);
    return out;
}

JNIEXPORT jstring JNICALL Java_io_pykbatch_spark_Native_errorName(JNIEnv *env, jclass cls, jint code)
{
    (void)cls;
    const char *unknown = "UNKNOWN_SERVER_ERROR";
    for (size_t i = 0; i < kb_kafka_error_count; i++) {
        if (kb_kafka_errors[i].code == code)
            return (*env)->NewStringUTF(env, kb_kafka_errors[i].name);
    }
    return (*env)->NewStringUTF(env, unknown);
}

JNIEXPORT jstring JNICALL Java_io_pykbatch_spark_Native_codecName(JNIEnv *env, jclass cls, jint codec)
{
    (void)cls;
    return codec >= 0 && codec < KB_CODEC_COUNT ? (*env)->NewStringUTF(env, kb_codec_names[codec]) : NULL;
}

/* CRC-32C of a whole array (kbatch_crc32c), or -1 with an exception pending. */
JNIEXPORT jlong JNICALL Java_io_pykbatch_spark_Native_crc32c(JNIEnv *env, jclass cls, jbyteArray buf)
{
    (void)cls;
    if (null_array(env, buf, "kbatch_crc32c: a null array"))
        return -1;
    jsize n = (*env)->GetArrayLength(env, buf);
    void *p = (*env)->GetPrimitiveArrayCritical(env, buf, NULL);
    if (p == NULL)
        return -1;
    uint32_t crc = kb_crc32c(0, (const uint8_t *)p, (size_t)n);
    (*env)->ReleasePrimitiveArrayCritical(env, buf, p, JNI_ABORT);
    return (jlong)crc;
}

/* ---- kbatch_repair: the row the validator just walked, rebuilt without its culprits ---- */

static jclass compressor_class;      /* global ref: io.pykbatch.spark.Compressor */
static jmethodID compress_method;    /* static byte[] compress(int codec, int magic, byte[] src) */

/* kb_repair's compress hook: Compressor.compress, its answer copied into the validator's buffer. */
static int compress(void *ctx, int codec, int magic, const uint8_t *src, size_t n, const uint8_t **out,
                    size_t *out_len)
{
    kb_jvm_validator *v = ctx;
    JNIEnv *env = v->codecs.env;
    if (n > INT32_MAX)
        return -1;
    jbyteArray in = (*env)->NewByteArray(env, (jsize)n);
    if (in == NULL) {
        (*env)->ExceptionClear(env);
        return -1;
    }
    (*env)->SetByteArrayRegion(env, in, 0, (jsize)n, (const jbyte *)src);
    jbyteArray got = (*env)->CallStaticObjectMethod(env, compressor_class, compress_method, codec, magic, in);
    (*env)->DeleteLocalRef(env, in);
    if ((*env)->ExceptionCheck(env) || got == NULL) {  /* the codec library failed: the row's repair fails */
        (*env)->ExceptionClear(env);
        return -1;
    }
    jsize m = (*env)->GetArrayLength(env, got);
    if ((size_t)m > v->compressed_cap) {
        uint8_t *grown = realloc(v->compressed, (size_t)m);
        if (grown == NULL) {
            (*env)->DeleteLocalRef(env, got);
            return -1;
        }
        v->compressed = grown;
        v->compressed_cap = (size_t)m;
    }
    (*env)->GetByteArrayRegion(env, got, 0, m, (jbyte *)v->compressed);
    (*env)->DeleteLocalRef(env, got);
    *out = v->compressed;
    *out_len = (size_t)m;
    return 0;
}

/* kbatch_repair of row[off, off + len), which the validator `handle` just validated (its culprits,
 * every one of them: Java checks none was left past the cap): the rebuilt bytes; what was left out
 * is then read with repairDropped / repairBytes / repairCulprits.  null with an exception pending. */
JNIEXPORT jbyteArray JNICALL Java_io_pykbatch_spark_Native_repair(JNIEnv *env, jclass cls, jlong handle, jbyteArray row,
                                                                 jint off, jint len)
{
    (void)cls;
    if (null_array(env, row, "kbatch_repair: a null array"))
        return NULL;
    kb_jvm_validator *v = (kb_jvm_validator *)(intptr_t)handle;
    if (compressor_class == NULL) {
        jclass local = (*env)->FindClass(env, "io/pykbatch/spark/Compressor");
        if (local == NULL)
            return NULL;  /* NoClassDefFoundError pending */
        compress_method = (*env)->GetStaticMethodID(env, local, "compress", "(II[B)[B");
        if (compress_method == NULL)
            return NULL;
        compressor_class = (*env)->NewGlobalRef(env, local);
        (*env)->DeleteLocalRef(env, local);
    }
    if (copy_row(env, row, off, len, &v->input, &v->input_cap, "kbatch_repair: no memory for a row") != 0)
        return NULL;
    kb_repair_opts o = {.resync_flags = kb_resync_flags(v->opts.strict, v->opts.origin == KB_ORIGIN_LOG),
                        .keep_offsets = v->opts.origin != KB_ORIGIN_CLIENT,
                        .decompress = decompress, .decompress_ctx = &v->codecs,
                        .compress = compress, .compress_ctx = v};
    size_t kept = (size_t)v->s.culprits < v->cap ? (size_t)v->s.culprits : v->cap;
    v->codecs.env = env;
    int rc = kb_repair(v->input, (size_t)len, v->out, kept, &o, &v->repair);
    v->codecs.env = NULL;
    if (rc != 0) {
        throw_named(env, rc == KB_REPAIR_NO_MEMORY ? "java/lang/OutOfMemoryError" : "java/lang/IllegalStateException",
                     rc == KB_REPAIR_NO_MEMORY ? "kbatch_repair: no memory for a row's repair"
                                               : "kbatch_repair: the codec library could not compress a rebuilt batch");
        return NULL;
    }
    if (v->repair.data_len > INT32_MAX) {
        throw_named(env, "java/lang/ArithmeticException", "kbatch_repair: a rebuilt row exceeds 2^31 - 1 bytes");
        return NULL;
    }
    jbyteArray out = (*env)->NewByteArray(env, (jsize)v->repair.data_len);
    if (out != NULL && v->repair.data_len)
        (*env)->SetByteArrayRegion(env, out, 0, (jsize)v->repair.data_len, (const jbyte *)v->repair.data);
    return out;
}

/* The last repair's dropped records, D_WIDTH longs each (RepairFunction.java reads the same). */
enum { D_ENTRY, D_RECORD_INDEX, D_HAS_FIELDS, D_OFFSET, D_KEY, D_KEY_LEN, D_VALUE, D_VALUE_LEN, D_FIRST_CULPRIT,
       D_CULPRITS, D_UNREPAIRABLE, D_WIDTH };

JNIEXPORT jlongArray JNICALL Java_io_pykbatch_spark_Native_repairDropped(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    const kb_repair_out *r = &((kb_jvm_validator *)(intptr_t)handle)->repair;
    if (r->n_dropped > (size_t)INT32_MAX / D_WIDTH) {
        throw_named(env, "java/lang/ArithmeticException", "kbatch_repair: too many dropped records for one row");
        return NULL;
    }
    jlongArray out = (*env)->NewLongArray(env, (jsize)(r->n_dropped * D_WIDTH));
    if (out == NULL)
        return NULL;
    for (size_t k = 0; k < r->n_dropped; k++) {
        const kb_dropped *d = &r->dropped[k];
        jlong w[D_WIDTH] = {d->entry, d->record_index, d->has_fields, d->offset, (jlong)d->key, d->key_len,
                            (jlong)d->value, d->value_len, (jlong)d->first_culprit, (jlong)d->n_culprits,
                            r->unrepairable};
        (*env)->SetLongArrayRegion(env, out, (jsize)(k * D_WIDTH), D_WIDTH, w);
    }
    return out;
}

/* The dropped records' keys and values (repairDropped's positions). */
JNIEXPORT jbyteArray JNICALL Java_io_pykbatch_spark_Native_repairBytes(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    const kb_repair_out *r = &((kb_jvm_validator *)(intptr_t)handle)->repair;
    if (r->bytes_len > INT32_MAX) {
        throw_named(env, "java/lang/ArithmeticException", "kbatch_repair: the dropped records exceed 2^31 - 1 bytes");
        return NULL;
    }
    jbyteArray out = (*env)->NewByteArray(env, (jsize)r->bytes_len);
    if (out != NULL && r->bytes_len)
        (*env)->SetByteArrayRegion(env, out, 0, (jsize)r->bytes_len, (const jbyte *)r->bytes);
    return out;
}

/* The dropped records' culprits: indexes into the validator's culprits, in its order. */
JNIEXPORT jintArray JNICALL Java_io_pykbatch_spark_Native_repairCulprits(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    const kb_repair_out *r = &((kb_jvm_validator *)(intptr_t)handle)->repair;
    jintArray out = (*env)->NewIntArray(env, (jsize)r->n_index);
    if (out != NULL && r->n_index)
        (*env)->SetIntArrayRegion(env, out, 0, (jsize)r->n_index, (const jint *)r->culprit_index);
    return out;
}

/* Validates len bytes at `address` (memory that does not move while Java runs: a mapped segment),
 * with the codecs called back; as validate, without the copy. */
JNIEXPORT jint JNICALL Java_io_pykbatch_spark_Native_validateAt(JNIEnv *env, jclass cls, jlong handle, jlong address,
                                                               jlong len, jlong now_ms)
{
    (void)cls;
    kb_jvm_validator *v = (kb_jvm_validator *)(intptr_t)handle;
    v->opts.now_ms = now_ms;
    v->codecs.env = env;
    kb_map_guard guard;
    if (KB_MAP_GUARD(&guard, (const void *)(intptr_t)address, (size_t)len) != 0) {
        v->codecs.env = NULL;  /* the segment shrank between the window's read and its validation */
        throw_named(env, "java/io/IOException", "kafka-segment: the segment shrank while it was read (a broker "
                    "truncated or deleted it): read it again");
        return -1;
    }
    int rc = run(v, (const uint8_t *)(intptr_t)address, (size_t)len);
    kb_map_guard_end(&guard);
    v->codecs.env = NULL;
    if (rc != 0) {
        throw_named(env, "java/lang/OutOfMemoryError", "kbatch: no memory for the culprits of a window");
        return -1;
    }
    write_summary(v);
    return 0;
}

/* ---- kafka-segment: a split of a segment file, mapped, read window by window ---- */

/* the window to Java, in a direct buffer of INFO_COUNT longs: counts, then the columns' addresses
 * (SegmentColumns.java reads the same layout) */
enum {
    INFO_ROWS, INFO_HEADER_ROWS, INFO_LO, INFO_HI, INFO_ENTRIES, INFO_UNDECODED, INFO_BASE, INFO_SIZE,
    INFO_OFFSET, INFO_TIMESTAMP, INFO_TIMESTAMP_TYPE, INFO_SEQUENCE, INFO_BATCH_INDEX, INFO_BATCH_POSITION,
    INFO_BASE_OFFSET, INFO_LEADER_EPOCH, INFO_PRODUCER_ID, INFO_PRODUCER_EPOCH, INFO_IS_TRANSACTIONAL,
    INFO_IS_CONTROL, INFO_KEY_VALID, INFO_KEY_OFFSETS, INFO_KEY_DATA, INFO_VALUE_VALID, INFO_VALUE_OFFSETS,
    INFO_VALUE_DATA, INFO_HEADER_OFFSETS, INFO_HKEY_OFFSETS, INFO_HKEY_DATA, INFO_HVALUE_VALID,
    INFO_HVALUE_OFFSETS, INFO_HVALUE_DATA, INFO_TIMESTAMP_TYPE_INDEX, INFO_COUNT
};

/* The store's counts and its columns' addresses into an info buffer (INFO_*). */
static void write_columns(jlong *o, const kb_columns *c)
{
    o[INFO_ROWS] = c->row;
    o[INFO_HEADER_ROWS] = c->header_row;
#define ADDRESS(slot, field) o[slot] = (jlong)(intptr_t)c->field
    ADDRESS(INFO_OFFSET, offset);
    ADDRESS(INFO_TIMESTAMP, timestamp);
    ADDRESS(INFO_TIMESTAMP_TYPE, timestamp_type_id);
    ADDRESS(INFO_TIMESTAMP_TYPE_INDEX, timestamp_type);
    ADDRESS(INFO_SEQUENCE, sequence);
    ADDRESS(INFO_BATCH_INDEX, batch_index);
    ADDRESS(INFO_BATCH_POSITION, batch_position);
    ADDRESS(INFO_BASE_OFFSET, base_offset);
    ADDRESS(INFO_LEADER_EPOCH, partition_leader_epoch);
    ADDRESS(INFO_PRODUCER_ID, producer_id);
    ADDRESS(INFO_PRODUCER_EPOCH, producer_epoch);
    ADDRESS(INFO_IS_TRANSACTIONAL, is_transactional);
    ADDRESS(INFO_IS_CONTROL, is_control);
    ADDRESS(INFO_KEY_VALID, key_valid);
    ADDRESS(INFO_KEY_OFFSETS, key_offsets);
    ADDRESS(INFO_KEY_DATA, key_data);
    ADDRESS(INFO_VALUE_VALID, value_valid);
    ADDRESS(INFO_VALUE_OFFSETS, value_offsets);
    ADDRESS(INFO_VALUE_DATA, value_data);
    ADDRESS(INFO_HEADER_OFFSETS, header_offsets);
    ADDRESS(INFO_HKEY_OFFSETS, hkey_offsets);
    ADDRESS(INFO_HKEY_DATA, hkey_data);
    ADDRESS(INFO_HVALUE_VALID, hvalue_valid);
    ADDRESS(INFO_HVALUE_OFFSETS, hvalue_offsets);
    ADDRESS(INFO_HVALUE_DATA, hvalue_data);
#undef ADDRESS
}

typedef struct {
    kb_jvm_codecs codecs;
    kb_log_windows w;
    kb_ranges ranges;     /* the read's record ranges (w.decode.ranges points here when any is set) */
    int fd;               /* kept open: the file's size is asked again before each window */
    void *map;
    size_t map_len;
    jobject info_buffer;  /* global ref */
    jlong *info;
    kb_log_consumer consumer; /* w.consumer points here once segmentConsumer set it */
    size_t shrunk_from;   /* the file's size when the read began, once it shrank while read (else 0) */
} kb_jvm_segment;

/* The file of `g` shrank while it was read (a guarded read faulted): the walk goes on to its new
 * end.  0, or -1 when it did not shrink (the fault was something else: the read cannot go on). */
static int segment_shrank(kb_jvm_segment *g)
{
    struct stat st;
    if (g->fd < 0 || fstat(g->fd, &st) != 0 || (size_t)st.st_size >= g->w.len)
        return -1;
    if (g->shrunk_from == 0)
        g->shrunk_from = g->map_len;
    g->w.len = (size_t)st.st_size;
    return 0;
}

static void segment_free(JNIEnv *env, kb_jvm_segment *g)
{
    codecs_free(env, &g->codecs);
    if (g->info_buffer)
        (*env)->DeleteGlobalRef(env, g->info_buffer);
    kb_log_windows_free(&g->w);
    kb_isolation_free(&g->consumer.iso);
    if (g->map)
        munmap(g->map, g->map_len);
    if (g->fd >= 0)
        close(g->fd);
    free(g);
}

/* What segmentNext makes of a window (SegmentReader's FILL_*): its records' columns, their count
 * alone (no column is read), or nothing (its entries' headers are read by segmentHeaders). */
enum { FILL_COLUMNS = 0, FILL_COUNT = 1, FILL_HEADERS = 2 };

/* Maps `path` read-only and starts a walk of its entries starting in [start, end) (end < 0: to
 * the end), each window filled as `fill` says.  0 with an IOException (the path named) or
 * OutOfMemoryError pending. */
JNIEXPORT jlong JNICALL Java_io_pykbatch_spark_Native_segmentOpen(JNIEnv *env, jclass cls, jstring path, jlong start,
                                                                 jlong end, jlong window_bytes, jboolean verify_crc,
                                                                 jint fill, jlong max_decompressed,
                                                                 jobject decompressor, jobject info,
                                                                 jlongArray ranges)
{
    (void)cls;
    if (null_array(env, path, "kafka-segment: a null path") || null_array(env, decompressor, "kafka-segment: no codecs") ||
        null_array(env, info, "kafka-segment: a null buffer") || null_array(env, ranges, "kafka-segment: no ranges"))
        return 0;
    jlong r[5];
    if ((*env)->GetArrayLength(env, ranges) != 5) {
        throw_named(env, "java/lang/IllegalArgumentException", "kafka-segment: ranges are 5 longs");
        return 0;
    }
    (*env)->GetLongArrayRegion(env, ranges, 0, 5, r);
    jlong *info_at = (*env)->GetDirectBufferAddress(env, info);
    if (info_at == NULL || (*env)->GetDirectBufferCapacity(env, info) < (jlong)(INFO_COUNT * sizeof(jlong))) {
        throw_named(env, "java/lang/IllegalArgumentException", "kafka-segment: the window buffer is too small");
        return 0;
    }
    if (find_codec_methods(env, decompressor) != 0)
        return 0;
    kb_map_guard_install();  /* a segment cut while it is read must not take the JVM down */
    kb_jvm_segment *g = calloc(1, sizeof *g);
    if (g == NULL) {
        throw_named(env, "java/lang/OutOfMemoryError", "kafka-segment: no memory for a reader");
        return 0;
    }
    g->fd = -1;
    const char *name = (*env)->GetStringUTFChars(env, path, NULL);
    if (name == NULL) {
        free(g);
        return 0;
    }
    char message[512];
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    struct stat st;
    const char *why = fd < 0 || fstat(fd, &st) != 0 ? strerror(errno) : !S_ISREG(st.st_mode) ? "not a regular file" : NULL;
    if (why != NULL) {
        snprintf(message, sizeof message, "kafka-segment: cannot read %s: %s", name, why);
        if (fd >= 0)
            close(fd);
        (*env)->ReleaseStringUTFChars(env, path, name);
        free(g);
        throw_named(env, "java/io/IOException", message);
        return 0;
    }
    g->map_len = (size_t)st.st_size;
    if (g->map_len > 0) {
        g->map = mmap(NULL, g->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (g->map == MAP_FAILED) {
            g->map = NULL;
            snprintf(message, sizeof message, "kafka-segment: cannot map %s: %s", name, strerror(errno));
            close(fd);
            (*env)->ReleaseStringUTFChars(env, path, name);
            free(g);
            throw_named(env, "java/io/IOException", message);
            return 0;
        }
        madvise(g->map, g->map_len, MADV_SEQUENTIAL);
    }
    g->fd = fd;
    (*env)->ReleaseStringUTFChars(env, path, name);
    g->codecs.decompressor = (*env)->NewGlobalRef(env, decompressor);
    g->codecs.scratch_cap = max_decompressed < 0 ? 0 : (size_t)max_decompressed;
    g->info_buffer = (*env)->NewGlobalRef(env, info);
    g->info = info_at;
    if (g->codecs.decompressor == NULL || g->info_buffer == NULL) {
        segment_free(env, g);
        throw_named(env, "java/lang/OutOfMemoryError", "kafka-segment: no memory for a reader");
        return 0;
    }
    g->ranges = (kb_ranges){.bounds = (int)r[0], .first_offset = r[1], .end_offset = r[2], .first_timestamp = r[3],
                            .end_timestamp = r[4]};
    kb_decode_opts decode = {.verify_crc = verify_crc ? 1 : 0, .decompress = decompress, .ctx = &g->codecs,
                             .ranges = g->ranges.bounds ? &g->ranges : NULL};
    g->w.store.c.layout = KB_LAYOUT_SPARK_TIME;
    g->w.store.count_only = fill == FILL_COUNT;
    kb_log_windows_init(&g->w, g->map, g->map_len, start < 0 ? 0 : (size_t)start,
                        end < 0 ? SIZE_MAX : (size_t)end, window_bytes <= 0 ? 1 : (size_t)window_bytes, &decode);
    g->w.headers_only = fill == FILL_HEADERS;  /* after init, which starts the walk afresh */
    g->info[INFO_BASE] = (jlong)(intptr_t)g->map;
    g->info[INFO_SIZE] = (jlong)g->map_len;
    return (jlong)(intptr_t)g;
}

/* kb_index_entry_trusted over the segment file at `path` (mapped for the check): whether its
 * offset index entry (offset, position) can be followed.  False when the file cannot be read. */
JNIEXPORT jboolean JNICALL Java_io_pykbatch_spark_Native_indexEntryTrusted(JNIEnv *env, jclass cls, jstring path,
                                                                         jlong position, jlong segment_base,
                                                                         jlong offset)
{
    (void)cls;
    if (null_array(env, path, "kafka-segment: a null path"))
        return JNI_FALSE;
    if (position == 0)
        return JNI_TRUE;
    const char *name = (*env)->GetStringUTFChars(env, path, NULL);
    if (name == NULL)
        return JNI_FALSE;
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    (*env)->ReleaseStringUTFChars(env, path, name);
    struct stat st;
    int trusted = 0;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            kb_map_guard_install();
            kb_map_guard guard;
            if (KB_MAP_GUARD(&guard, map, (size_t)st.st_size) == 0) {  /* a file cut meanwhile: not trusted */
                trusted = kb_index_entry_trusted(map, (size_t)st.st_size, position, segment_base, offset);
                kb_map_guard_end(&guard);
            }
            munmap(map, (size_t)st.st_size);
        }
    }
    if (fd >= 0)
        close(fd);
    return trusted ? JNI_TRUE : JNI_FALSE;
}

/* The next window into the reader's columns, its counts and addresses into the info buffer: 1,
 * 0 when the split is read, -1 with an exception pending. */
JNIEXPORT jint JNICALL Java_io_pykbatch_spark_Native_segmentNext(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    kb_jvm_segment *g = (kb_jvm_segment *)(intptr_t)handle;
    kb_fault f;
    /* A mapped page past a file's new end faults (SIGBUS) in native code, which would take the
     * executor down: a segment cut short while it is read (a broker's recovery truncating it) is
     * read to its new end, as if that were where it ended. */
    struct stat st;
    if (g->fd >= 0 && fstat(g->fd, &st) == 0 && (size_t)st.st_size < g->w.len)
        g->w.len = (size_t)st.st_size;
    g->codecs.env = env;
    /* the check above and the reads race a truncation: a page past the new end faults, and the
     * window is read again from its start to the file's new end */
    size_t pos0 = g->w.pos;
    int done0 = g->w.done;
    kb_log_account_mark mark;
    kb_log_account_mark_at(&g->w, &mark);
    kb_map_guard guard;
    int rc;
    while (KB_MAP_GUARD(&guard, g->map, g->map_len) != 0) {
        if (segment_shrank(g) != 0) {
            g->codecs.env = NULL;
            throw_named(env, "java/io/IOException", "kafka-segment: a read of the segment faulted, and the file "
                        "did not shrink");
            return -1;
        }
        g->w.pos = pos0 < g->w.len ? pos0 : g->w.len;
        g->w.done = done0;
        kb_log_account_rewind(&g->w, &mark);
    }
    rc = kb_log_next_window(&g->w, &f);
    kb_map_guard_end(&guard);
    g->codecs.env = NULL;
    if (rc == KB_COLUMNS_NO_MEMORY) {
        throw_named(env, "java/lang/OutOfMemoryError", "kafka-segment: no memory for a window's columns");
        return -1;
    }
    if (rc == KB_COLUMNS_TOO_LARGE) {
        throw_named(env, "java/lang/ArithmeticException", "kafka-segment: a window's records exceed one column "
                    "(2^31 - 1 bytes or headers): set a smaller windowBytes");
        return -1;
    }
    if (rc < 0) {
        char message[512], text[400];
        int64_t args[8] = {f.args[0], f.args[1], f.args[2], 0, 0, 0, 0, 0};
        long n = kb_render(f.rule, KB_TEXT_MESSAGE, args, "", text, sizeof text);
        snprintf(message, sizeof message, "kafka-segment: the log's framing is lost at byte %zu: %s", f.pos,
                 n >= 0 ? text : kb_rule_table[f.rule].id);
        throw_named(env, "java/io/IOException", message);
        return -1;
    }
    const kb_columns *c = &g->w.store.c;
    jlong *o = g->info;
    write_columns(o, c);
    o[INFO_LO] = (jlong)g->w.lo;
    o[INFO_HI] = (jlong)g->w.hi;
    o[INFO_ENTRIES] = g->w.entries;
    o[INFO_UNDECODED] = g->w.undecoded;
    return rc;
}

/* The walk of `handle` reads as a consumer of offsets [first, last] receives them (the tiered
 * reader; kb_log_consumer): spec = {committed, has a last stable offset, that offset, first, last,
 * then (first offset, producer id) pairs of the aborted transactions}.  Before the first window. */
JNIEXPORT void JNICALL Java_io_pykbatch_spark_Native_segmentConsumer(JNIEnv *env, jclass cls, jlong handle,
                                                                    jlongArray spec)
{
    (void)cls;
    if (null_array(env, spec, "kafka-segment: a null consumer"))
        return;
    kb_jvm_segment *g = (kb_jvm_segment *)(intptr_t)handle;
    jsize n = (*env)->GetArrayLength(env, spec);
    if (g == NULL || n < 5 || (n - 5) % 2 != 0 || g->w.consumer != NULL) {
        throw_named(env, "java/lang/IllegalArgumentException",
                    "kafka-segment: a consumer is 5 longs and offset pairs, set once on an open reader");
        return;
    }
    jlong *v = malloc((size_t)n * sizeof *v);
    if (v == NULL) {
        throw_named(env, "java/lang/OutOfMemoryError", "kafka-segment: no memory for a consumer");
        return;
    }
    (*env)->GetLongArrayRegion(env, spec, 0, n, v);
    int64_t lso = v[2];
    g->consumer.first = v[3];
    g->consumer.last = v[4];
    int rc = kb_isolation_init(&g->consumer.iso, v[0] != 0, v[1] ? &lso : NULL, (const int64_t *)(v + 5),
                               (int32_t)((n - 5) / 2));
    free(v);
    if (rc != 0) {
        throw_named(env, "java/lang/OutOfMemoryError", "kafka-segment: no memory for a consumer");
        return;
    }
    g->w.consumer = &g->consumer;
}

JNIEXPORT void JNICALL Java_io_pykbatch_spark_Native_segmentClose(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    if (handle != 0)
        segment_free(env, (kb_jvm_segment *)(intptr_t)handle);
}

/* ---- kbatch_decode: one row's records into columns Java reads in place ---- */

typedef struct {
    kb_jvm_codecs codecs;
    kb_column_store store;
    kb_decode_opts decode;
    int64_t expect;
    uint8_t *input;            /* the row, copied: Java's codecs run while it is read */
    size_t input_cap;
    jobject info_buffer;       /* global ref */
    jlong *info;
} kb_jvm_decoder;

static void decoder_free(JNIEnv *env, kb_jvm_decoder *d)
{
    codecs_free(env, &d->codecs);
    if (d->info_buffer)
        (*env)->DeleteGlobalRef(env, d->info_buffer);
    kb_column_store_free(&d->store);
    free(d->input);
    free(d);
}

JNIEXPORT jlong JNICALL Java_io_pykbatch_spark_Native_decoderOpen(JNIEnv *env, jclass cls, jboolean verify_crc,
                                                                 jlong max_decompressed, jobject decompressor,
                                                                 jobject info)
{
    (void)cls;
    if (null_array(env, decompressor, "kbatch_decode: no codecs") || null_array(env, info, "kbatch_decode: a null buffer"))
        return 0;
    jlong *info_at = (*env)->GetDirectBufferAddress(env, info);
    if (info_at == NULL || (*env)->GetDirectBufferCapacity(env, info) < (jlong)(INFO_COUNT * sizeof(jlong))) {
        throw_named(env, "java/lang/IllegalArgumentException", "kbatch_decode: the column buffer is too small");
        return 0;
    }
    if (find_codec_methods(env, decompressor) != 0)
        return 0;
    kb_jvm_decoder *d = calloc(1, sizeof *d);
    if (d == NULL) {
        throw_named(env, "java/lang/OutOfMemoryError", "kbatch_decode: no memory for a decoder");
        return 0;
    }
    d->codecs.decompressor = (*env)->NewGlobalRef(env, decompressor);
    d->codecs.scratch_cap = max_decompressed < 0 ? 0 : (size_t)max_decompressed;
    d->info_buffer = (*env)->NewGlobalRef(env, info);
    d->info = info_at;
    if (d->codecs.decompressor == NULL || d->info_buffer == NULL) {
        decoder_free(env, d);
        throw_named(env, "java/lang/OutOfMemoryError", "kbatch_decode: no memory for a decoder");
        return 0;
    }
    d->decode = (kb_decode_opts){.verify_crc = verify_crc ? 1 : 0, .decompress = decompress, .ctx = &d->codecs};
    return (jlong)(intptr_t)d;
}

/* Decodes row[off, off + len) into the decoder's columns (the last row's records replaced): the
 * record count, -1 for a row that does not decode cleanly (kbatch_decode's null), -2 with an
 * exception pending. */
JNIEXPORT jint JNICALL Java_io_pykbatch_spark_Native_decodeRow(JNIEnv *env, jclass cls, jlong handle, jbyteArray row,
                                                              jint off, jint len)
{
    (void)cls;
    if (null_array(env, row, "kbatch_decode: a null array"))
        return -2;
    kb_jvm_decoder *d = (kb_jvm_decoder *)(intptr_t)handle;
    if (copy_row(env, row, off, len, &d->input, &d->input_cap, "kbatch_decode: no memory for a row") != 0)
        return -2;
    kb_columns_rewind(&d->store.c, 0, 0);
    kb_fault f;
    kb_fault_place where;
    int32_t record, entry;
    d->codecs.env = env;
    int rc = kb_decode_row(&d->store, d->input, (size_t)len, &d->decode, &d->expect, &f, &where, &record, &entry);
    d->codecs.env = NULL;
    if (rc == KB_COLUMNS_NO_MEMORY || rc == KB_COLUMNS_TOO_LARGE) {
        throw_named(env, rc == KB_COLUMNS_NO_MEMORY ? "java/lang/OutOfMemoryError" : "java/lang/ArithmeticException",
                    rc == KB_COLUMNS_NO_MEMORY ? "kbatch_decode: no memory for a row's records"
                                               : "kbatch_decode: a row's records exceed one column (2^31 - 1 bytes)");
        return -2;
    }
    write_columns(d->info, &d->store.c);
    return rc == 0 ? (jint)d->store.c.row : -1;
}

/* kbatch_batch_info of row[off, off + len): BI_WIDTH longs an entry (BatchInfoFunction.java reads
 * the same layout), the entries before the walk ends (kb_entry_info_next); null with an exception
 * pending.  The decoder's codecs find a compressed v0/v1 wrapper's first offset. */
enum { BI_POSITION, BI_SIZE, BI_MAGIC, BI_BASE_OFFSET, BI_LAST_OFFSET, BI_RECORD_COUNT, BI_CODEC, BI_TIMESTAMP_TYPE,
       BI_MAX_TIMESTAMP, BI_PRODUCER_ID, BI_PRODUCER_EPOCH, BI_BASE_SEQUENCE, BI_LEADER_EPOCH, BI_TRANSACTIONAL,
       BI_CONTROL, BI_CRC, BI_VALID, BI_WIDTH };

/* One entry's header into BI_WIDTH slots, its position plus `base`. */
static void entry_info_slots(jlong *w, const kb_entry_info *info, int64_t base)
{
    w[BI_POSITION] = base + info->position;
    w[BI_SIZE] = info->size;
    w[BI_MAGIC] = info->magic;
    w[BI_BASE_OFFSET] = info->base_offset;
    w[BI_LAST_OFFSET] = info->last_offset;
    w[BI_RECORD_COUNT] = info->record_count;
    w[BI_CODEC] = info->codec;
    w[BI_TIMESTAMP_TYPE] = info->timestamp_type;
    w[BI_MAX_TIMESTAMP] = info->max_timestamp;
    w[BI_PRODUCER_ID] = info->producer_id;
    w[BI_PRODUCER_EPOCH] = info->producer_epoch;
    w[BI_BASE_SEQUENCE] = info->base_sequence;
    w[BI_LEADER_EPOCH] = info->partition_leader_epoch;
    w[BI_TRANSACTIONAL] = info->is_transactional;
    w[BI_CONTROL] = info->is_control;
    w[BI_CRC] = info->crc;
    w[BI_VALID] = info->is_valid;
}

/* The entries' headers of buf[0, len) (kb_entry_info_next's walk), BI_WIDTH longs each, positions
 * plus `base`; null with an exception pending.  The caller has set its codecs' env. */
static jlongArray entry_infos(JNIEnv *env, const uint8_t *buf, size_t len, const kb_decode_opts *o, int64_t base)
{
    jlong *out = NULL;
    size_t n = 0, cap = 0, pos = 0;
    kb_entry_info info;
    kb_fault f;
    while (kb_entry_info_next(buf, len, &pos, o, &info, &f) == 1) {
        if (n == cap) {  /* grown by doubling: a row's entries are not known before the walk */
            size_t grown_cap = cap ? 2 * cap : 8;
            jlong *grown = realloc(out, grown_cap * BI_WIDTH * sizeof *out);
            if (grown == NULL || grown_cap * BI_WIDTH > INT32_MAX) {
                free(grown ? grown : out);
                throw_named(env, "java/lang/OutOfMemoryError", "kbatch: no memory for the entries' headers");
                return NULL;
            }
            out = grown;
            cap = grown_cap;
        }
        entry_info_slots(out + n * BI_WIDTH, &info, base);
        n++;
    }
    jlongArray result = (*env)->NewLongArray(env, (jsize)(n * BI_WIDTH));
    if (result != NULL && n)
        (*env)->SetLongArrayRegion(env, result, 0, (jsize)(n * BI_WIDTH), out);
    free(out);
    return result;
}

/* The headers of the last window's entries (kafka-segment's batches mode), BI_WIDTH longs each,
 * positions in the segment: every entry of the window's walk read on its own, one whose header does
 * not read marked with size -1 (it gives no row; its neighbours theirs).  null with an exception
 * pending. */
JNIEXPORT jlongArray JNICALL Java_io_pykbatch_spark_Native_segmentHeaders(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    kb_jvm_segment *g = (kb_jvm_segment *)(intptr_t)handle;
    size_t n = (size_t)(g->w.entries > 0 ? g->w.entries : 0);
    jlong *out = calloc(n ? n * BI_WIDTH : 1, sizeof *out);
    if (out == NULL) {
        throw_named(env, "java/lang/OutOfMemoryError", "kafka-segment: no memory for a window's headers");
        return NULL;
    }
    g->codecs.env = env;
    size_t pos = g->w.lo;
    kb_map_guard guard;
    if (KB_MAP_GUARD(&guard, g->map, g->map_len) != 0) {
        g->codecs.env = NULL;
        free(out);
        throw_named(env, "java/io/IOException", "kafka-segment: the segment shrank while it was read (a broker "
                    "truncated or deleted it): read it again");
        return NULL;
    }
    for (size_t k = 0; k < n && pos < g->w.hi; k++) {  /* the window's walk again: its entries are contiguous */
        kb_entry e;
        kb_fault f;
        if (kb_next_entry_resync(g->w.buf, g->w.hi, pos, KB_RESYNC_LYING_SIZES | KB_RESYNC_ZERO_TAIL, &e, &f) !=
                KB_ENTRY_OK || e.size == 0)
            break;
        size_t at = 0;
        kb_entry_info info;
        jlong *w = out + k * BI_WIDTH;
        if (kb_entry_info_next(g->w.buf + e.pos, e.size, &at, &g->w.decode, &info, &f) == 1)
            entry_info_slots(w, &info, (int64_t)e.pos);
        else
            w[BI_SIZE] = -1;
        pos = e.pos + e.size;
    }
    kb_map_guard_end(&guard);
    g->codecs.env = NULL;
    jlongArray result = (*env)->NewLongArray(env, (jsize)(n * BI_WIDTH));
    if (result != NULL && n)
        (*env)->SetLongArrayRegion(env, result, 0, (jsize)(n * BI_WIDTH), out);
    free(out);
    return result;
}

/* ---- kafka-segment's account of what cannot be read (validate): kb_log_account to Java ---- */

/* SegmentLosses.java reads the same layouts */
enum { SK_POS, SK_SIZE, SK_RULE, SK_ARGS, SK_TOP_BEFORE = SK_ARGS + 3, SK_NEXT_FIRST, SK_WIDTH };
enum { EN_POS, EN_SIZE, EN_FIRST, EN_LAST, EN_TOP_BEFORE, EN_LAST_BEFORE, EN_RULE, EN_ARGS, EN_WIDTH = EN_ARGS + 3 };
enum { LA_TOP, LA_BEFORE_POS, LA_LAST, LA_REACHED_END, LA_VALID_BYTES, LA_PAST_END, LA_FIRST, LA_SHRUNK_FROM,
       LA_SIZE, LA_WIDTH };

static jlongArray long_array(JNIEnv *env, const jlong *values, size_t n)
{
    jlongArray out = (*env)->NewLongArray(env, (jsize)n);
    if (out != NULL && n)
        (*env)->SetLongArrayRegion(env, out, 0, (jsize)n, values);
    return out;
}

static void account_state(const kb_jvm_segment *g, jlong *o)
{
    const kb_log_account *a = g->w.account;
    o[LA_SHRUNK_FROM] = (jlong)g->shrunk_from;
    o[LA_SIZE] = (jlong)g->w.len;
    o[LA_TOP] = a->top;
    o[LA_BEFORE_POS] = a->before_pos;
    o[LA_LAST] = a->last;
    o[LA_REACHED_END] = a->reached_end;
    o[LA_VALID_BYTES] = (jlong)a->valid_bytes;
    o[LA_PAST_END] = a->past_end;
    o[LA_FIRST] = a->first;
}

/* Starts the account of the walk of `handle` (before its first window): its state (LA_*) as a walk
 * of the segment from its first byte knows it at the split's start.  null with an exception
 * pending. */
JNIEXPORT jlongArray JNICALL Java_io_pykbatch_spark_Native_segmentAccount(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    kb_jvm_segment *g = (kb_jvm_segment *)(intptr_t)handle;
    kb_map_guard guard;
    int rc;
    while (KB_MAP_GUARD(&guard, g->map, g->map_len) != 0) {
        if (segment_shrank(g) != 0) {
            throw_named(env, "java/io/IOException", "kafka-segment: a read of the segment faulted, and the file "
                        "did not shrink");
            return NULL;
        }
    }
    rc = kb_log_windows_account(&g->w);
    kb_map_guard_end(&guard);
    if (rc != 0) {
        throw_named(env, "java/lang/OutOfMemoryError", "kafka-segment: no memory for a walk's account");
        return NULL;
    }
    jlong o[LA_WIDTH];
    account_state(g, o);
    return long_array(env, o, LA_WIDTH);
}

/* The account's state now (LA_*): after the last window, where the walk ended. */
JNIEXPORT jlongArray JNICALL Java_io_pykbatch_spark_Native_segmentState(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    kb_jvm_segment *g = (kb_jvm_segment *)(intptr_t)handle;
    jlong o[LA_WIDTH] = {0};
    if (g->w.account)
        account_state(g, o);
    return long_array(env, o, LA_WIDTH);
}

/* The spans passed over whose neighbours are known, SK_WIDTH longs each, handed out once. */
JNIEXPORT jlongArray JNICALL Java_io_pykbatch_spark_Native_segmentSkips(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    kb_jvm_segment *g = (kb_jvm_segment *)(intptr_t)handle;
    int32_t n = g->w.account ? g->w.account->n_skips : 0;
    kb_log_skip *skips = malloc((size_t)(n ? n : 1) * sizeof *skips);
    jlong *o = malloc((size_t)(n ? n : 1) * SK_WIDTH * sizeof *o);
    if (skips == NULL || o == NULL) {
        free(skips);
        free(o);
        throw_named(env, "java/lang/OutOfMemoryError", "kafka-segment: no memory for a walk's account");
        return NULL;
    }
    n = kb_log_take_skips(&g->w, skips, n);
    for (int32_t i = 0; i < n; i++) {
        jlong *r = o + (size_t)i * SK_WIDTH;
        r[SK_POS] = (jlong)skips[i].pos;
        r[SK_SIZE] = (jlong)skips[i].size;
        r[SK_RULE] = skips[i].rule;
        for (int k = 0; k < 3; k++)
            r[SK_ARGS + k] = skips[i].args[k];
        r[SK_TOP_BEFORE] = skips[i].top_before;
        r[SK_NEXT_FIRST] = skips[i].next_first;
    }
    jlongArray out = long_array(env, o, (size_t)n * SK_WIDTH);
    free(skips);
    free(o);
    return out;
}

/* The last window's entries as the account read them, EN_WIDTH longs each. */
JNIEXPORT jlongArray JNICALL Java_io_pykbatch_spark_Native_segmentEntries(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    kb_jvm_segment *g = (kb_jvm_segment *)(intptr_t)handle;
    int32_t n = g->w.account ? g->w.entries : 0;
    jlong *o = malloc((size_t)(n ? n : 1) * EN_WIDTH * sizeof *o);
    if (o == NULL) {
        throw_named(env, "java/lang/OutOfMemoryError", "kafka-segment: no memory for a walk's account");
        return NULL;
    }
    for (int32_t i = 0; i < n; i++) {
        const kb_log_entry *e = &g->w.account->entries[i];
        jlong *r = o + (size_t)i * EN_WIDTH;
        r[EN_POS] = (jlong)e->pos;
        r[EN_SIZE] = (jlong)e->size;
        r[EN_FIRST] = e->first;
        r[EN_LAST] = e->last;
        r[EN_TOP_BEFORE] = e->top_before;
        r[EN_LAST_BEFORE] = e->last_before;
        r[EN_RULE] = e->rule;
        for (int k = 0; k < 3; k++)
            r[EN_ARGS + k] = e->args[k];
    }
    jlongArray out = long_array(env, o, (size_t)n * EN_WIDTH);
    free(o);
    return out;
}

JNIEXPORT jlongArray JNICALL Java_io_pykbatch_spark_Native_batchInfo(JNIEnv *env, jclass cls, jlong handle,
                                                                    jbyteArray row, jint off, jint len)
{
    (void)cls;
    if (null_array(env, row, "kbatch_batch_info: a null array"))
        return NULL;
    kb_jvm_decoder *d = (kb_jvm_decoder *)(intptr_t)handle;
    if (copy_row(env, row, off, len, &d->input, &d->input_cap, "kbatch_batch_info: no memory for a row") != 0)
        return NULL;
    d->codecs.env = env;
    jlongArray out = entry_infos(env, d->input, (size_t)len, &d->decode, 0);
    d->codecs.env = NULL;
    return out;
}

JNIEXPORT void JNICALL Java_io_pykbatch_spark_Native_decoderClose(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    if (handle != 0)
        decoder_free(env, (kb_jvm_decoder *)(intptr_t)handle);
}

/* kb_timestamp_type_names[index]: a decoded record's timestamp_type. */
JNIEXPORT jstring JNICALL Java_io_pykbatch_spark_Native_timestampTypeName(JNIEnv *env, jclass cls, jint index)
{
    (void)cls;
    if (index < 0 || index >= (jint)(sizeof kb_timestamp_type_names / sizeof kb_timestamp_type_names[0]))
        return NULL;
    return (*env)->NewStringUTF(env, kb_timestamp_type_names[index]);
}

/* ---- kbatch_from_avro: one datum at a time into the core's Avro columns, read in place ---- */

/* A program and column layout as pykbatch.values.avro_program compiled them on the driver,
 * packed by spark_udfs/jvm_avro.py (little-endian): AVRO_HEADER int32s (the counts), then the
 * nodes, children, table, default spans (int64, from an 8-aligned position), defaults (padded to
 * 4), specs, column children. */
enum { AH_NODES, AH_CHILDREN, AH_TABLE, AH_DEFAULTS, AH_DEFAULT_BYTES, AH_ROOT, AH_COLUMNS, AH_ROOT_COLUMN,
       AH_COLUMN_CHILDREN, AVRO_HEADER };
/* per column to Java: valid, data, offsets, type_ids, length (AvroDecoder.java reads the same) */
enum { AC_VALID, AC_DATA, AC_OFFSETS, AC_TYPE_IDS, AC_LENGTH, AC_WIDTH };

typedef struct {
    uint8_t *blob;               /* owns every table the program and the columns point into */
    kb_avro_program p;
    kb_avro_columns c;
    int32_t *conversions;        /* two a column (kb_unsafe_row.h) */
    int unsafe;                  /* the datum is a record kb_unsafe_row writes */
    uint8_t *row;                /* the last UnsafeRow written */
    size_t row_cap;
    jobject info_buffer;         /* global ref: AC_WIDTH longs a column, then the fault (rule, pos) */
    jlong *info;
} kb_jvm_avro;

static void avro_free(JNIEnv *env, kb_jvm_avro *a)
{
    kb_avro_columns_free(&a->c);
    if (a->info_buffer)
        (*env)->DeleteGlobalRef(env, a->info_buffer);
    free(a->blob);
    free(a->conversions);
    free(a->row);
    free(a);
}

/* The tables of a packed program, each bounded by the blob's length: 0, or -1. */
static int avro_unpack(kb_jvm_avro *a, size_t len)
{
    if (len < AVRO_HEADER * 4)
        return -1;
    int32_t h[AVRO_HEADER];
    memcpy(h, a->blob, sizeof h);
    for (int k = 0; k < AVRO_HEADER; k++)
        if (h[k] < 0)
            return -1;
    size_t at = AVRO_HEADER * 4;
    size_t sizes[] = {(size_t)h[AH_NODES] * sizeof(kb_avro_node), (size_t)h[AH_CHILDREN] * 4, (size_t)h[AH_TABLE] * 4,
                      (size_t)h[AH_DEFAULTS] * 16, ((size_t)h[AH_DEFAULT_BYTES] + 3) & ~(size_t)3,
                      (size_t)h[AH_COLUMNS] * sizeof(kb_avro_colspec), (size_t)h[AH_COLUMN_CHILDREN] * 4};
    const uint8_t *parts[7];
    for (int k = 0; k < 7; k++) {
        if (k == 3)  /* the int64 spans start 8-aligned (the packer pads to them) */
            at = (at + 7) & ~(size_t)7;
        if (at > len || sizes[k] > len - at)
            return -1;
        parts[k] = a->blob + at;
        at += sizes[k];
    }
    if (h[AH_CHILDREN] < 1 || h[AH_TABLE] < 1 || h[AH_DEFAULTS] < 1 || h[AH_COLUMNS] < 1 ||
        h[AH_COLUMN_CHILDREN] < h[AH_COLUMNS])
        return -1;
    a->p = (kb_avro_program){.nodes = (const kb_avro_node *)parts[0], .children = (const int32_t *)parts[1],
                             .table = (const int32_t *)parts[2], .default_spans = (const int64_t *)parts[3],
                             .defaults = parts[4], .root = h[AH_ROOT], .n_nodes = h[AH_NODES],
                             .n_children = h[AH_CHILDREN], .n_table = h[AH_TABLE], .n_defaults = h[AH_DEFAULTS],
                             .n_default_bytes = h[AH_DEFAULT_BYTES]};
    a->c.specs = (const kb_avro_colspec *)parts[5];
    a->c.column_children = (const int32_t *)parts[6];
    a->c.n_columns = h[AH_COLUMNS];
    a->c.root = h[AH_ROOT_COLUMN];
    int32_t where;
    return kb_avro_check(&a->p, &a->c, &where) == 0 ? 0 : -1;
}

JNIEXPORT jlong JNICALL Java_io_pykbatch_spark_Native_avroOpen(JNIEnv *env, jclass cls, jbyteArray program,
                                                              jintArray conversions, jobject info)
{
    (void)cls;
    if (null_array(env, program, "kbatch_from_avro: a null program") ||
        null_array(env, conversions, "kbatch_from_avro: null conversions") ||
        null_array(env, info, "kbatch_from_avro: a null buffer"))
        return 0;
    kb_jvm_avro *a = calloc(1, sizeof *a);
    jsize len = (*env)->GetArrayLength(env, program);
    if (a == NULL || (a->blob = malloc(len ? (size_t)len : 1)) == NULL) {
        free(a);
        throw_named(env, "java/lang/OutOfMemoryError", "kbatch_from_avro: no memory for a program");
        return 0;
    }
    (*env)->GetByteArrayRegion(env, program, 0, len, (jbyte *)a->blob);
    if (avro_unpack(a, (size_t)len) != 0) {
        free(a->blob);
        free(a);
        throw_named(env, "java/lang/IllegalArgumentException", "kbatch_from_avro: the compiled program is not sound");
        return 0;
    }
    jlong *info_at = (*env)->GetDirectBufferAddress(env, info);
    if (info_at == NULL ||
        (*env)->GetDirectBufferCapacity(env, info) < (jlong)(((size_t)a->c.n_columns * AC_WIDTH + 8) * sizeof(jlong))) {
        free(a->blob);
        free(a);
        throw_named(env, "java/lang/IllegalArgumentException", "kbatch_from_avro: the column buffer is too small");
        return 0;
    }
    if ((*env)->GetArrayLength(env, conversions) != 2 * a->c.n_columns) {
        free(a->blob);
        free(a);
        throw_named(env, "java/lang/IllegalArgumentException", "kbatch_from_avro: two conversion ints a column");
        return 0;
    }
    a->conversions = malloc((size_t)a->c.n_columns * 2 * sizeof(int32_t));
    if (a->conversions == NULL || kb_avro_columns_init(&a->c, 1) != 0 ||
        (a->info_buffer = (*env)->NewGlobalRef(env, info)) == NULL) {
        avro_free(env, a);
        throw_named(env, "java/lang/OutOfMemoryError", "kbatch_from_avro: no memory for the columns");
        return 0;
    }
    (*env)->GetIntArrayRegion(env, conversions, 0, 2 * a->c.n_columns, (jint *)a->conversions);
    a->unsafe = kb_unsafe_row_fits(&a->c, a->conversions);
    a->info = info_at;
    return (jlong)(intptr_t)a;
}

/* The Confluent framing of value (kb_read_frame): 0 with out[0] the schema id and out[1] where the
 * datum starts; else the fault's rule with out[0] its position and out[1..3] its args. */
JNIEXPORT jint JNICALL Java_io_pykbatch_spark_Native_readFrame(JNIEnv *env, jclass cls, jbyteArray value,
                                                              jlongArray out)
{
    (void)cls;
    if (null_array(env, value, "kbatch_from_confluent: a null array") || null_array(env, out, "kbatch: a null array"))
        return -2;
    if ((*env)->GetArrayLength(env, out) < 4) {
        throw_named(env, "java/lang/IndexOutOfBoundsException", "kbatch_from_confluent: out holds 4 longs");
        return -2;
    }
    uint8_t head[5];  /* Confluent's framing is the first five bytes: no need to pin the value */
    jsize whole = (*env)->GetArrayLength(env, value);
    jsize len = whole < 5 ? whole : 5;
    (*env)->GetByteArrayRegion(env, value, 0, len, (jbyte *)head);
    kb_frame fr;
    kb_fault f;
    jlong o[4] = {0, 0, 0, 0};
    int32_t indexes[1];
    jint rc = 0;
    if (kb_read_frame(head, (size_t)len, KB_FRAMING_CONFLUENT, &fr, indexes, 1, &f) != 0) {
        rc = (jint)f.rule;
        o[0] = (jlong)f.pos;
        o[1] = f.args[0];
        o[2] = f.args[1];
        o[3] = f.args[2];
    } else {
        o[0] = fr.schema_id;
        o[1] = fr.payload;
    }
    (*env)->SetLongArrayRegion(env, out, 0, 4, o);
    return rc;
}

/* Whether avroDecode writes each datum as an UnsafeRow (a record of flat fields). */
JNIEXPORT jboolean JNICALL Java_io_pykbatch_spark_Native_avroUnsafe(JNIEnv *env, jclass cls, jlong handle)
{
    (void)env;
    (void)cls;
    return ((kb_jvm_avro *)(intptr_t)handle)->unsafe ? JNI_TRUE : JNI_FALSE;
}

/* Decodes the datum row[off, off + len) as the only entry of the columns, their addresses and
 * lengths then in the info buffer: 0; -1 when it cannot be read (the fault's rule, position and
 * args after the columns); -2 with an exception pending. */
JNIEXPORT jint JNICALL Java_io_pykbatch_spark_Native_avroDecode(JNIEnv *env, jclass cls, jlong handle, jbyteArray row,
                                                               jint off, jint len, jint start, jboolean allow_trailing)
{
    (void)cls;
    if (null_array(env, row, "kbatch_from_avro: a null array"))
        return -2;
    kb_jvm_avro *a = (kb_jvm_avro *)(intptr_t)handle;
    jsize total = (*env)->GetArrayLength(env, row);
    if (off < 0 || len < 0 || off > total - len || start < 0 || start > len) {
        throw_named(env, "java/lang/IndexOutOfBoundsException", "kbatch: row bounds outside its array");
        return -2;
    }
    kb_avro_columns_reset(&a->c);
    kb_fault f;
    uint8_t *pinned = (*env)->GetPrimitiveArrayCritical(env, row, NULL);  /* the decoder never calls Java */
    if (pinned == NULL)
        return -2;
    int rc = kb_avro_decode(&a->p, &a->c, pinned + off, (size_t)start, (size_t)len, allow_trailing ? 1 : 0, &f);
    (*env)->ReleasePrimitiveArrayCritical(env, row, pinned, JNI_ABORT);
    if (rc == KB_AVRO_NO_MEMORY || rc == KB_AVRO_TOO_LARGE) {
        throw_named(env, rc == KB_AVRO_NO_MEMORY ? "java/lang/OutOfMemoryError" : "java/lang/ArithmeticException",
                    "kbatch_from_avro: no room for a datum's columns");
        return -2;
    }
    jlong *o = a->info;
    for (int32_t i = 0; i < a->c.n_columns; i++) {
        const kb_avro_column *col = &a->c.cols[i];
        jlong *w = o + (size_t)i * AC_WIDTH;
        w[AC_VALID] = (jlong)(intptr_t)col->valid;
        w[AC_DATA] = (jlong)(intptr_t)col->data;
        w[AC_OFFSETS] = (jlong)(intptr_t)col->offsets;
        w[AC_TYPE_IDS] = (jlong)(intptr_t)col->type_ids;
        w[AC_LENGTH] = col->length;
    }
    if (rc == 0 && a->unsafe) {  /* the row Spark reads, its address and size after the fault's slots */
        int64_t size = kb_unsafe_row_write(&a->c, a->conversions, &a->row, &a->row_cap);
        if (size < 0) {
            throw_named(env, "java/lang/OutOfMemoryError", "kbatch_from_avro: no memory for a row");
            return -2;
        }
        jlong *made = o + (size_t)a->c.n_columns * AC_WIDTH + 5;
        made[0] = (jlong)(intptr_t)a->row;
        made[1] = size;
        return 0;
    }
    if (rc == -1) {
        jlong *fault = o + (size_t)a->c.n_columns * AC_WIDTH;
        fault[0] = f.rule;
        fault[1] = (jlong)f.pos;
        fault[2] = f.args[0];
        fault[3] = f.args[1];
        fault[4] = f.args[2];
        return -1;
    }
    return 0;
}

JNIEXPORT void JNICALL Java_io_pykbatch_spark_Native_avroClose(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    if (handle != 0)
        avro_free(env, (kb_jvm_avro *)(intptr_t)handle);
}
