/* Property strings as bytes (`key\x01value\x02...`), for the compiled record
 * builders: the checks and look-ups `tidemq.common.properties` makes on
 * decoded strings, on plain ASCII bytes (callers send anything else to
 * their general path). */
#ifndef TIDEMQ_PROPERTY_TEXT_H
#define TIDEMQ_PROPERTY_TEXT_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_PROPS 32767

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
} Span;

static inline int span_equals(Span s, const char *text) {
    size_t m = strlen(text);
    return (size_t)s.n == m && memcmp(s.p, text, m) == 0;
}

static inline int span_ascii(Span s) {
    unsigned char any = 0;
    for (Py_ssize_t i = 0; i < s.n; i++) any |= s.p[i];
    return any < 0x80;
}

/* A value the broker writes into a property string: ASCII, no separators. */
static inline int plain_value(Span s) {
    for (Py_ssize_t i = 0; i < s.n; i++)
        if (s.p[i] >= 0x80 || s.p[i] == 0x01 || s.p[i] == 0x02) return 0;
    return 1;
}

/* Whether `s` contains any of `keys` (a NULL-ended list of texts that each
 * end with \x01) anywhere, as a substring search for each would find it
 * (`key in raw` in the Python twins): every occurrence of such a text ends
 * at a \x01 of `s`, so one pass over those (a few per property string)
 * does for a search per key. */
static inline int span_contains_any(Span s, const char *const *keys) {
    const unsigned char *start = s.p, *end = s.p + s.n, *at = s.p;
    while (at < end && (at = memchr(at, 0x01, (size_t)(end - at))) != NULL) {
        Py_ssize_t upto = at - start + 1; /* bytes up to and including this \x01 */
        for (int k = 0; keys[k]; k++) {
            Py_ssize_t m = (Py_ssize_t)strlen(keys[k]);
            if (m <= upto && memcmp(at + 1 - m, keys[k], (size_t)m) == 0) return 1;
        }
        at++;
    }
    return 0;
}

static const char *const STAMPED_KEYS[] = {"MSG_REGION\x01", "TRACE_ON\x01", NULL};
static const char *const CLUSTER_KEY[] = {"CLUSTER\x01", NULL};

/* Whether appending the non-empty send stamp (MSG_REGION, TRACE_ON) to `s`
 * would leave a second item of its keys: the general path replaces them
 * (the twin is property_text.holds_stamped_key). */
static inline int holds_stamped_key(Span s, Span stamp) {
    return stamp.n > 0 && span_contains_any(s, STAMPED_KEYS);
}

/* The property string kept as sent: ASCII, every item `key\x01value\x02`
 * by the send processor's test (`_well_formed_properties`). */
static inline int plain_well_formed(Span s) {
    const unsigned char *p = s.p;
    Py_ssize_t n = s.n;
    if (n == 0) return 1;
    if (p[n - 1] != 0x02 || p[0] == 0x01) return 0;
    Py_ssize_t ones = 0, twos = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c >= 0x80) return 0;
        if (c == 0x01) ones++;
        else if (c == 0x02) {
            twos++;
            if (i + 1 < n && p[i + 1] == 0x01) return 0;
        }
    }
    return ones == twos;
}

static inline uint32_t java_hash_bytes(uint32_t h, const unsigned char *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) h = h * 31u + s[i];
    return h;
}

/* RocketMQ's index keyHash of `topic#key` (`topic_hash` covers `topic#`):
 * abs of the Java hash, 0 when abs overflows. */
static inline int32_t index_hash(uint32_t topic_hash, Span key) {
    uint32_t h = java_hash_bytes(topic_hash, key.p, key.n);
    int32_t s = (int32_t)h;
    if (s == INT32_MIN) return 0;
    return s < 0 ? -s : s;
}

/* The value of the last item named `key`, as decode_properties keeps it
 * (items split on \x02, each at its first \x01). */
static inline int find_value(Span s, const char *key, Span *value) {
    Py_ssize_t key_len = (Py_ssize_t)strlen(key);
    const unsigned char *p = s.p;
    Py_ssize_t n = s.n, i = 0;
    int found = 0;
    while (i < n) {
        const unsigned char *end = memchr(p + i, 0x02, (size_t)(n - i));
        Py_ssize_t item_end = end ? (Py_ssize_t)(end - p) : n;
        const unsigned char *sep = memchr(p + i, 0x01, (size_t)(item_end - i));
        if (sep && (Py_ssize_t)(sep - (p + i)) == key_len && memcmp(p + i, key, (size_t)key_len) == 0) {
            value->p = sep + 1;
            value->n = item_end - (Py_ssize_t)(sep + 1 - p);
            found = 1;
        }
        i = item_end + 1;
    }
    return found;
}

/* Growable output bytes. */
typedef struct {
    unsigned char *data;
    Py_ssize_t len, cap;
} Out;

static inline int out_reserve(Out *o, Py_ssize_t more) {
    if (o->len + more <= o->cap) return 0;
    Py_ssize_t cap = o->cap ? o->cap : 256;
    while (cap < o->len + more) cap *= 2;
    unsigned char *d = PyMem_Realloc(o->data, (size_t)cap);
    if (!d) {
        PyErr_NoMemory();
        return -1;
    }
    o->data = d;
    o->cap = cap;
    return 0;
}

#define MAX_INDEX_KEYS 64

/* The index entries of one record (its unique key, then each of its keys,
 * without repeats: IndexService._key_hashes) appended to `out` as 12 bytes
 * each; 1 when the record has more distinct keys than this path holds
 * (the caller's general path indexes those), -1 on a memory error. */
static inline int index_record(Out *out, uint32_t topic_hash, Span unique_key, int has_unique,
                        Span keys, int has_keys, int64_t phys) {
    int32_t hashes[MAX_INDEX_KEYS];
    int nh = 0;
    if (has_unique && unique_key.n > 0) hashes[nh++] = index_hash(topic_hash, unique_key);
    if (has_keys) {
        Py_ssize_t k = 0;
        while (k < keys.n) {
            const unsigned char *sp = memchr(keys.p + k, ' ', (size_t)(keys.n - k));
            Py_ssize_t kend = sp ? (Py_ssize_t)(sp - keys.p) : keys.n;
            if (kend > k) {
                Span one = {keys.p + k, kend - k};
                int32_t h = index_hash(topic_hash, one);
                int seen = 0;
                for (int j = 0; j < nh; j++) seen |= hashes[j] == h;
                if (!seen) {
                    if (nh == MAX_INDEX_KEYS) return 1;
                    hashes[nh++] = h;
                }
            }
            k = kend + 1;
        }
    }
    if (out_reserve(out, 12 * (Py_ssize_t)nh) < 0) return -1;
    for (int j = 0; j < nh; j++) {
        put_i64(out->data + out->len, phys);
        put_i32(out->data + out->len + 8, hashes[j]);
        out->len += 12;
    }
    return 0;
}

/* The offset message id prefix of a store host: its address and port in hex. */
static inline Py_ssize_t id_prefix(char *buf, const unsigned char *host, Py_ssize_t host_len, int port) {
    int w = 0;
    for (Py_ssize_t i = 0; i < host_len; i++) w += snprintf(buf + w, 3, "%02X", host[i]);
    w += snprintf(buf + w, 9, "%08X", (unsigned)port);
    return w;
}
#endif
