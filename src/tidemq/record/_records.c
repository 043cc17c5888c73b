/* The client-side record codecs, compiled: twins of tidemq.record.codec.
 *
 *   decode_records(buf, *, verify_crc=False, decompress=False) -> list[MessageExt]
 *   decode_record_columns(buf, *, decompress=True) -> RecordColumns
 *   encode_batch(messages) -> bytes
 *   split_batch(body) -> list[BatchEntry]
 *   batch_unique_ids(messages, topic, wait, make_unique_id) -> list[str] | None
 *
 * Same results and the same ProtocolError messages as the Python reference
 * (codec.py); the layout is described there. `configure(...)` (called once by
 * tidemq.record.records at import) hands over the classes made here and the
 * Python functions used for rare cases: IPv6 host text, zlib inflate and CRC,
 * and the whole Python function when an input is of an unusual shape (a
 * memoryview of wide items, a dict subclass of properties, a non-bytes body,
 * an out-of-range flag...), so that those give exactly what Python gives,
 * errors included.
 *
 * Every length read from a buffer is checked against the end before use;
 * arithmetic on offsets is done in int64 (a record's lengths are int32).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdarg.h>
#include <stdio.h>

#include "_native_common.h"

#define MAGIC_V1 ((int32_t)-626843481)
#define MAGIC_V2 ((int32_t)-626843477)
#define SYSFLAG_POS 36
#define FIXED_V4 88
#define BORNHOST_V6 0x10
#define STOREHOST_V6 0x20
#define COMPRESSED 0x1
#define BATCH_HEAD 20
#define BATCH_FIXED 22
#define MAX_PROPS 32767

/* -- configuration ------------------------------------------------------- */

static PyObject *ProtocolError;
static PyTypeObject *MessageExtType;
static PyTypeObject *MessageType;
static PyObject *RecordColumnsType;
static PyTypeObject *BatchEntryType;
static PyObject *py_inflate;        /* codec._inflate(bytes) -> bytes */
static PyObject *py_host_text;      /* codec._host_text(ip, port) -> (text, id prefix) */
static PyObject *py_crc32;          /* zlib.crc32 */
static PyObject *py_decode_records; /* the reference functions, for unusual inputs */
static PyObject *py_decode_record_columns;
static PyObject *py_encode_batch;
static PyObject *py_split_batch;

/* MessageExt slots, in this order (Message's four first). */
static const char *const EXT_FIELDS[] = {
    "topic", "body", "flag", "properties", "queue_id", "store_size", "queue_offset",
    "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host", "msg_id",
    "commit_log_offset", "body_crc", "reconsume_times", "prepared_transaction_offset",
};
enum {
    F_TOPIC, F_BODY, F_FLAG, F_PROPERTIES, F_QUEUE_ID, F_STORE_SIZE, F_QUEUE_OFFSET,
    F_SYS_FLAG, F_BORN_TS, F_BORN_HOST, F_STORE_TS, F_STORE_HOST, F_MSG_ID,
    F_COMMIT_LOG_OFFSET, F_BODY_CRC, F_RECONSUME, F_PREPARED, N_EXT_FIELDS
};
#define N_MESSAGE_FIELDS 4
static Py_ssize_t ext_offset[N_EXT_FIELDS];
static int configured;

static PyObject *s_DELAY, *s_WAIT, *s_UNIQ_KEY, *s_zero;

/* A WAIT value as Java's isWaitStoreMsgOK reads it (Boolean.parseBoolean:
 * "true" in any letter case waits, anything else does not): 1 or 0, as the
 * Python twin's `value.lower() == "true"`. A value that is not ASCII never
 * waits there either: the only character outside ASCII that lowers into
 * ASCII is the Kelvin sign (to "k"). */
static int wait_value_waits(PyObject *value)
{
    if (!PyUnicode_IS_ASCII(value)) return 0;
    if (PyUnicode_GET_LENGTH(value) != 4) return 0;
    const char *text = (const char *)PyUnicode_1BYTE_DATA(value);
    const char *word = "true";
    for (int i = 0; i < 4; i++) {
        char c = text[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != word[i]) return 0;
    }
    return 1;
}

#define SLOT(obj, i) (*(PyObject **)((char *)(obj) + ext_offset[i]))

/* -- errors ----------------------------------------------------------------- */

static void proto_error(const char *fmt, ...) {
    char text[256];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    PyErr_SetString(ProtocolError, text);
}

/* `what is not UTF-8` in place of a UnicodeDecodeError; other errors stay. */
static PyObject *utf8(const unsigned char *p, Py_ssize_t n, const char *what) {
    PyObject *s = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        proto_error("%s is not UTF-8", what);
    }
    return s;
}

static int all_ascii(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    uint64_t high = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        high |= word;
    }
    for (; i < n; i++) high |= p[i];
    return (high & 0x8080808080808080ull) == 0;
}

/* A quick hash of a short byte string (cache slots only), 8 bytes a step. */
static uint32_t short_hash(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        h = (h ^ word) * 0xFF51AFD7ED558CCDull;
    }
    if (i < n) {
        uint64_t word = 0;
        if (n >= 8) {
            memcpy(&word, p + n - 8, 8); /* the last 8 bytes, overlapping */
        } else {
            for (; i < n; i++) word = (word << 8) | p[i];
        }
        h = (h ^ word) * 0xFF51AFD7ED558CCDull;
    }
    return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

/* -- buffers -------------------------------------------------------------- */

/* 1: `view` holds the bytes of `obj`; 0: not a shape handled here (the
 * Python twin decides, errors included); -1: error set. */
static int get_bytes(PyObject *obj, Py_buffer *view) {
    if (!(PyBytes_CheckExact(obj) || PyByteArray_CheckExact(obj) || PyMemoryView_Check(obj)))
        return 0; /* a subclass may override len() or slicing */
    if (PyObject_GetBuffer(obj, view, PyBUF_FULL_RO) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->ndim != 1 || view->itemsize != 1 || !PyBuffer_IsContiguous(view, 'C')) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* -- hosts and ids ------------------------------------------------------- */

#define HOST_CACHE 64
typedef struct {
    PyObject *text;
    int32_t port;
    int iplen;
    unsigned char ip[16];
} host_entry;
static host_entry host_cache[HOST_CACHE];

/* "a.b.c.d:port" or "[v6]:port" (the Python twin's text), new reference. */
static PyObject *host_text(const unsigned char *ip, int iplen, int32_t port) {
    uint32_t h = (uint32_t)port * 2654435761u;
    for (int i = 0; i < iplen; i++) h = (h ^ ip[i]) * 16777619u;
    host_entry *e = &host_cache[(h >> 7) % HOST_CACHE];
    if (e->text != NULL && e->iplen == iplen && e->port == port && memcmp(e->ip, ip, iplen) == 0) {
        Py_INCREF(e->text);
        return e->text;
    }
    PyObject *text;
    if (iplen == 4) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%u.%u.%u.%u:%ld", ip[0], ip[1], ip[2], ip[3], (long)port);
        text = PyUnicode_FromStringAndSize(buf, n);
    } else {
        PyObject *answer = PyObject_CallFunction(py_host_text, "y#l", (const char *)ip,
                                                 (Py_ssize_t)iplen, (long)port);
        if (answer == NULL) return NULL;
        if (!PyTuple_Check(answer) || PyTuple_GET_SIZE(answer) < 1 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(answer, 0))) {
            Py_DECREF(answer);
            PyErr_SetString(PyExc_TypeError, "_host_text must return (str, str)");
            return NULL;
        }
        text = PyTuple_GET_ITEM(answer, 0);
        Py_INCREF(text);
        Py_DECREF(answer);
    }
    if (text == NULL) return NULL;
    Py_XSETREF(e->text, text);
    Py_INCREF(text);
    e->iplen = iplen;
    e->port = port;
    memcpy(e->ip, ip, iplen);
    return text;
}

static const char HEX[] = "0123456789ABCDEF";

/* The offset message id: store ip, port and commit log offset in upper hex. */
static PyObject *message_id(const unsigned char *ip, int iplen, int32_t port, int64_t physical) {
    Py_ssize_t n = 2 * iplen + 8 + 16;
    PyObject *s = PyUnicode_New(n, 127);
    if (s == NULL) return NULL;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(s);
    for (int i = 0; i < iplen; i++) {
        *out++ = HEX[ip[i] >> 4];
        *out++ = HEX[ip[i] & 15];
    }
    uint32_t p = (uint32_t)port;
    for (int i = 28; i >= 0; i -= 4) *out++ = HEX[(p >> i) & 15];
    uint64_t o = (uint64_t)physical;
    for (int i = 60; i >= 0; i -= 4) *out++ = HEX[(o >> i) & 15];
    return s;
}

/* -- property strings ----------------------------------------------------- */

#define KEY_CACHE 128
#define KEY_CACHE_MAX_LEN 40
typedef struct {
    PyObject *key;
    Py_ssize_t len;
    char text[KEY_CACHE_MAX_LEN];
} key_entry;
static key_entry key_cache[KEY_CACHE];

/* A property name as a str; short ASCII names are shared (they repeat in
 * every record, and a shared str keeps its hash). */
static PyObject *property_key(const unsigned char *p, Py_ssize_t n) {
    if (n > KEY_CACHE_MAX_LEN || !all_ascii(p, n)) return utf8(p, n, "properties");
    key_entry *e = &key_cache[short_hash(p, n) % KEY_CACHE];
    if (e->key != NULL && e->len == n && memcmp(e->text, p, n) == 0) {
        Py_INCREF(e->key);
        return e->key;
    }
    PyObject *key = PyUnicode_New(n, 127);
    if (key == NULL) return NULL;
    memcpy(PyUnicode_1BYTE_DATA(key), p, n);
    if (PyObject_Hash(key) == -1) {
        Py_DECREF(key);
        return NULL;
    }
    Py_XSETREF(e->key, key);
    Py_INCREF(key);
    e->len = n;
    memcpy(e->text, p, n);
    return key;
}

#define VALUE_CACHE 256
#define VALUE_CACHE_MAX_LEN 24
typedef struct {
    PyObject *value;
    Py_ssize_t len;
    char text[VALUE_CACHE_MAX_LEN];
} value_entry;
static value_entry value_cache[VALUE_CACHE];

/* A property value as a str. ASCII is made directly (the common case), and
 * short ASCII values are shared: tags, WAIT, the cluster name repeat. */
static PyObject *property_value(const unsigned char *p, Py_ssize_t n) {
    if (!all_ascii(p, n)) return utf8(p, n, "properties");
    value_entry *e = NULL;
    if (n <= VALUE_CACHE_MAX_LEN) {
        e = &value_cache[short_hash(p, n) % VALUE_CACHE];
        if (e->value != NULL && e->len == n && memcmp(e->text, p, n) == 0) {
            Py_INCREF(e->value);
            return e->value;
        }
    }
    PyObject *value = PyUnicode_New(n, 127);
    if (value == NULL) return NULL;
    if (n > 0) memcpy(PyUnicode_1BYTE_DATA(value), p, n);
    if (e != NULL) {
        Py_XSETREF(e->value, Py_NewRef(value));
        e->len = n;
        memcpy(e->text, p, n);
    }
    return value;
}

/* A dict about to receive `count` items, sized for them up front. */
static PyObject *new_dict(Py_ssize_t count) {
#if PY_VERSION_HEX < 0x030D0000
    return count > 5 ? _PyDict_NewPresized(count) : PyDict_New();
#else
    return PyDict_New();
#endif
}

/* `decode_properties(str(raw, "utf-8"))`: items split on \x02 and each at
 * its first \x01; items without \x01 or with an empty name are skipped (but
 * must be UTF-8 all the same); a later pair of a name replaces the value. */
static PyObject *parse_properties(const unsigned char *p, Py_ssize_t n) {
    PyObject *result = new_dict(n / 20 > 64 ? 64 : n / 20); /* a guess: ~20 bytes a pair */
    if (result == NULL) return NULL;
    Py_ssize_t i = 0;
    while (i <= n) {
        const unsigned char *item = p + i;
        const unsigned char *stop = memchr(item, 0x02, (size_t)(n - i));
        Py_ssize_t item_len = stop ? stop - item : n - i;
        const unsigned char *sep = memchr(item, 0x01, (size_t)item_len);
        if (sep != NULL && sep > item) {
            Py_ssize_t key_len = sep - item;
            PyObject *key = property_key(item, key_len);
            if (key == NULL) goto fail;
            PyObject *value = property_value(sep + 1, item_len - key_len - 1);
            if (value == NULL) {
                Py_DECREF(key);
                goto fail;
            }
            int rc = PyDict_SetItem(result, key, value);
            Py_DECREF(key);
            Py_DECREF(value);
            if (rc < 0) goto fail;
        } else if (!all_ascii(item, item_len)) {
            PyObject *skipped = utf8(item, item_len, "properties");
            if (skipped == NULL) goto fail;
            Py_DECREF(skipped);
        }
        i += item_len + 1;
    }
    return result;
fail:
    Py_DECREF(result);
    return NULL;
}

/* -- records -------------------------------------------------------------- */

typedef struct {
    int32_t total, magic, crc, queue_id, flag, sys_flag, born_port, store_port, reconsume;
    int64_t queue_offset, physical, born_ts, store_ts, prepared;
    const unsigned char *born_ip, *store_ip;
    int born_iplen, store_iplen;
    Py_ssize_t body_start, body_len, topic_start, topic_len, props_start, props_len;
} record;

/* The record at `offset` located and its lengths checked (`_fixed_fields`
 * and `_locate_tail` of codec.py, same order, same messages). */
static int locate(const unsigned char *buf, Py_ssize_t len, Py_ssize_t offset, record *r) {
    if (len - offset < SYSFLAG_POS + 4) {
        proto_error("buffer too short for a record at %zd", offset);
        return -1;
    }
    const unsigned char *p = buf + offset;
    int32_t flags = be_i32(p + SYSFLAG_POS);
    r->born_iplen = (flags & BORNHOST_V6) ? 16 : 4;
    r->store_iplen = (flags & STOREHOST_V6) ? 16 : 4;
    Py_ssize_t fixed = FIXED_V4 + (r->born_iplen - 4) + (r->store_iplen - 4);
    if (len - offset < fixed) {
        proto_error("buffer too short for a record at %zd", offset);
        return -1;
    }
    r->total = be_i32(p);
    r->magic = be_i32(p + 4);
    r->crc = be_i32(p + 8);
    r->queue_id = be_i32(p + 12);
    r->flag = be_i32(p + 16);
    r->queue_offset = be_i64(p + 20);
    r->physical = be_i64(p + 28);
    r->sys_flag = flags;
    r->born_ts = be_i64(p + 40);
    const unsigned char *q = p + 48;
    r->born_ip = q;
    q += r->born_iplen;
    r->born_port = be_i32(q);
    q += 4;
    r->store_ts = be_i64(q);
    q += 8;
    r->store_ip = q;
    q += r->store_iplen;
    r->store_port = be_i32(q);
    q += 4;
    r->reconsume = be_i32(q);
    r->prepared = be_i64(q + 4);
    int32_t body_len = be_i32(q + 12);

    if (body_len < 0) {
        proto_error("negative body length %ld", (long)body_len);
        return -1;
    }
    int64_t end = (int64_t)offset + r->total;
    if (r->total < fixed || end > (int64_t)len) {
        proto_error("record at %zd of size %ld overruns the buffer", offset, (long)r->total);
        return -1;
    }
    int tlen_size;
    if (r->magic == MAGIC_V1) {
        tlen_size = 1;
    } else if (r->magic == MAGIC_V2) {
        tlen_size = 2;
    } else {
        proto_error("bad record magic 0x%08lx", (unsigned long)(uint32_t)r->magic);
        return -1;
    }
    int64_t body_start = (int64_t)offset + fixed;
    int64_t topic_len_pos = body_start + body_len;
    if (topic_len_pos + tlen_size > end) {
        proto_error("body overruns the record");
        return -1;
    }
    int64_t topic_len = tlen_size == 1 ? (int64_t)(int8_t)buf[topic_len_pos]
                                       : (int64_t)be_i16(buf + topic_len_pos);
    if (topic_len < 0) {
        proto_error("negative topic length %lld", (long long)topic_len);
        return -1;
    }
    int64_t topic_start = topic_len_pos + tlen_size;
    int64_t props_len_pos = topic_start + topic_len;
    if (props_len_pos + 2 > end) {
        proto_error("topic overruns the record");
        return -1;
    }
    int64_t props_len = be_i16(buf + props_len_pos);
    if (props_len < 0) {
        proto_error("negative properties length %lld", (long long)props_len);
        return -1;
    }
    if (props_len_pos + 2 + props_len != end) {
        proto_error("TOTALSIZE %ld does not match the field lengths (%lld)", (long)r->total,
                    (long long)(props_len_pos + 2 + props_len - offset));
        return -1;
    }
    r->body_start = (Py_ssize_t)body_start;
    r->body_len = body_len;
    r->topic_start = (Py_ssize_t)topic_start;
    r->topic_len = (Py_ssize_t)topic_len;
    r->props_start = (Py_ssize_t)(props_len_pos + 2);
    r->props_len = (Py_ssize_t)props_len;
    return 0;
}

static int is_zlib(int32_t flags) {
    uint32_t f = (uint32_t)flags;
    if (!(f & COMPRESSED)) return 0;
    uint32_t kind = (f & 0x700) >> 8;
    return kind == 0 || kind == 3;
}

static PyObject *inflate(PyObject *body) {
    PyObject *out = PyObject_CallOneArg(py_inflate, body);
    if (out != NULL && !PyBytes_Check(out)) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_TypeError, "_inflate must return bytes");
        return NULL;
    }
    return out;
}

/* The topic as str, reusing the previous record's when the bytes are equal. */
typedef struct {
    PyObject *text;
    const unsigned char *raw;
    Py_ssize_t len;
} topic_memo;

static PyObject *topic_text(topic_memo *memo, const unsigned char *p, Py_ssize_t n) {
    if (memo->text != NULL && memo->len == n && memcmp(memo->raw, p, n) == 0) {
        Py_INCREF(memo->text);
        return memo->text;
    }
    PyObject *text = utf8(p, n, "topic");
    if (text == NULL) return NULL;
    Py_XSETREF(memo->text, text);
    Py_INCREF(text);
    memo->raw = p;
    memo->len = n;
    return text;
}

static int check_configured(void) {
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "tidemq.record._records is not configured");
        return -1;
    }
    return 0;
}

static PyObject *set_long(PyObject *obj, int field, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL) return NULL;
    SLOT(obj, field) = v;
    return v;
}

/* One MessageExt from a located record. */
static PyObject *make_message(const unsigned char *buf, const record *r, Py_ssize_t offset,
                              int verify_crc, int decompress, topic_memo *memo) {
    int32_t flags = r->sys_flag;
    PyObject *body = PyBytes_FromStringAndSize((const char *)buf + r->body_start, r->body_len);
    if (body == NULL) return NULL;
    if (verify_crc) {
        PyObject *crc = PyObject_CallOneArg(py_crc32, body);
        if (crc == NULL) goto fail_body;
        unsigned long long value = PyLong_AsUnsignedLongLongMask(crc);
        Py_DECREF(crc);
        if (value == (unsigned long long)-1 && PyErr_Occurred()) goto fail_body;
        if ((long long)(value & 0x7FFFFFFFull) != (long long)r->crc) {
            proto_error("body CRC mismatch in the record at %zd", offset);
            goto fail_body;
        }
    }
    if (decompress && is_zlib(flags)) {
        PyObject *inflated = inflate(body);
        Py_DECREF(body);
        if (inflated == NULL) return NULL;
        body = inflated;
        flags &= ~COMPRESSED;
    }
    PyObject *topic = topic_text(memo, buf + r->topic_start, r->topic_len);
    if (topic == NULL) goto fail_body;
    PyObject *props = parse_properties(buf + r->props_start, r->props_len);
    if (props == NULL) {
        Py_DECREF(topic);
        goto fail_body;
    }
    PyObject *m = MessageExtType->tp_alloc(MessageExtType, 0);
    if (m == NULL) {
        Py_DECREF(topic);
        Py_DECREF(props);
        goto fail_body;
    }
    /* every slot is filled before `m` is returned; one left NULL on an error
     * is fine for the deallocator */
    SLOT(m, F_TOPIC) = topic;
    SLOT(m, F_BODY) = body;
    SLOT(m, F_PROPERTIES) = props;
    if (!set_long(m, F_FLAG, r->flag) || !set_long(m, F_QUEUE_ID, r->queue_id) ||
        !set_long(m, F_STORE_SIZE, r->total) || !set_long(m, F_QUEUE_OFFSET, r->queue_offset) ||
        !set_long(m, F_SYS_FLAG, flags) || !set_long(m, F_BORN_TS, r->born_ts) ||
        !set_long(m, F_STORE_TS, r->store_ts) || !set_long(m, F_COMMIT_LOG_OFFSET, r->physical) ||
        !set_long(m, F_BODY_CRC, r->crc) || !set_long(m, F_RECONSUME, r->reconsume) ||
        !set_long(m, F_PREPARED, r->prepared))
        goto fail_message;
    if ((SLOT(m, F_BORN_HOST) = host_text(r->born_ip, r->born_iplen, r->born_port)) == NULL)
        goto fail_message;
    if ((SLOT(m, F_STORE_HOST) = host_text(r->store_ip, r->store_iplen, r->store_port)) == NULL)
        goto fail_message;
    if ((SLOT(m, F_MSG_ID) = message_id(r->store_ip, r->store_iplen, r->store_port, r->physical)) ==
        NULL)
        goto fail_message;
    return m;
fail_message:
    Py_DECREF(m);
    return NULL;
fail_body:
    Py_DECREF(body);
    return NULL;
}

static PyObject *decode_records(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"buf", "verify_crc", "decompress", NULL};
    PyObject *obj;
    int verify_crc = 0, decompress = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$pp:decode_records", names, &obj,
                                     &verify_crc, &decompress))
        return NULL;
    if (check_configured() < 0) return NULL;
    Py_buffer view;
    int got = get_bytes(obj, &view);
    if (got < 0) return NULL;
    if (got == 0) return PyObject_Call(py_decode_records, args, kwargs);

    const unsigned char *buf = view.buf;
    Py_ssize_t len = view.len, offset = 0;
    topic_memo memo = {NULL, NULL, 0};
    PyObject *messages = PyList_New(0);
    if (messages == NULL) goto done;
    while (offset < len) {
        record r;
        if (locate(buf, len, offset, &r) < 0) goto fail;
        PyObject *m = make_message(buf, &r, offset, verify_crc, decompress, &memo);
        if (m == NULL) goto fail;
        int rc = PyList_Append(messages, m);
        Py_DECREF(m);
        if (rc < 0) goto fail;
        offset += r.total;
    }
    goto done;
fail:
    Py_CLEAR(messages);
done:
    Py_XDECREF(memo.text);
    PyBuffer_Release(&view);
    return messages;
}

/* -- columns -------------------------------------------------------------- */

enum {
    C_QUEUE_ID, C_QUEUE_OFFSET, C_BORN_TS, C_STORE_TS, C_RECONSUME, C_BODY, C_TOPIC,
    C_PROPERTIES, C_MSG_ID, N_COLUMNS
};

static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

static PyObject *decode_record_columns(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"buf", "decompress", NULL};
    PyObject *obj;
    int decompress = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$p:decode_record_columns", names, &obj,
                                     &decompress))
        return NULL;
    if (check_configured() < 0) return NULL;
    Py_buffer view;
    int got = get_bytes(obj, &view);
    if (got < 0) return NULL;
    if (got == 0) return PyObject_Call(py_decode_record_columns, args, kwargs);

    const unsigned char *buf = view.buf;
    Py_ssize_t len = view.len, offset = 0;
    topic_memo memo = {NULL, NULL, 0};
    PyObject *result = NULL;
    PyObject *cols[N_COLUMNS] = {NULL};
    for (int i = 0; i < N_COLUMNS; i++)
        if ((cols[i] = PyList_New(0)) == NULL) goto done;
    while (offset < len) {
        record r;
        if (locate(buf, len, offset, &r) < 0) goto done;
        PyObject *body = PyBytes_FromStringAndSize((const char *)buf + r.body_start, r.body_len);
        if (body == NULL) goto done;
        if (decompress && is_zlib(r.sys_flag)) {
            PyObject *inflated = inflate(body);
            Py_DECREF(body);
            if (inflated == NULL) goto done;
            body = inflated;
        }
        if (append_new(cols[C_QUEUE_ID], PyLong_FromLong(r.queue_id)) < 0 ||
            append_new(cols[C_QUEUE_OFFSET], PyLong_FromLongLong(r.queue_offset)) < 0 ||
            append_new(cols[C_BORN_TS], PyLong_FromLongLong(r.born_ts)) < 0 ||
            append_new(cols[C_STORE_TS], PyLong_FromLongLong(r.store_ts)) < 0 ||
            append_new(cols[C_RECONSUME], PyLong_FromLong(r.reconsume)) < 0 ||
            append_new(cols[C_BODY], body) < 0 ||
            append_new(cols[C_TOPIC], topic_text(&memo, buf + r.topic_start, r.topic_len)) < 0 ||
            append_new(cols[C_PROPERTIES], utf8(buf + r.props_start, r.props_len, "properties")) <
                0 ||
            append_new(cols[C_MSG_ID],
                       message_id(r.store_ip, r.store_iplen, r.store_port, r.physical)) < 0)
            goto done;
        offset += r.total;
    }
    result = PyObject_Vectorcall(RecordColumnsType, cols, N_COLUMNS, NULL);
done:
    for (int i = 0; i < N_COLUMNS; i++) Py_XDECREF(cols[i]);
    Py_XDECREF(memo.text);
    PyBuffer_Release(&view);
    return result;
}

/* -- batch bodies -------------------------------------------------------- */

static PyObject *split_batch(PyObject *self, PyObject *obj) {
    if (check_configured() < 0) return NULL;
    Py_buffer view;
    int got = get_bytes(obj, &view);
    if (got < 0) return NULL;
    if (got == 0) return PyObject_CallOneArg(py_split_batch, obj);

    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len, offset = 0;
    PyObject *entries = PyList_New(0);
    if (entries == NULL) goto done;
    while (offset < end) {
        if (end - offset < BATCH_FIXED) {
            proto_error("truncated batch entry at %zd", offset);
            goto fail;
        }
        const unsigned char *p = buf + offset;
        int32_t total = be_i32(p), flag = be_i32(p + 12), body_len = be_i32(p + 16);
        if (body_len < 0) {
            proto_error("negative body length %ld in batch entry at %zd", (long)body_len, offset);
            goto fail;
        }
        int64_t body_start = (int64_t)offset + BATCH_HEAD;
        int64_t props_len_pos = body_start + body_len;
        if (props_len_pos + 2 > end) {
            proto_error("batch entry at %zd overruns the body", offset);
            goto fail;
        }
        int64_t props_len = be_i16(buf + props_len_pos);
        if (props_len < 0) {
            proto_error("negative properties length in batch entry at %zd", offset);
            goto fail;
        }
        int64_t entry_end = props_len_pos + 2 + props_len;
        if (entry_end > end) {
            proto_error("batch entry at %zd overruns the body", offset);
            goto fail;
        }
        if ((int64_t)total != entry_end - offset) {
            proto_error("batch entry at %zd: TOTALSIZE %ld != %lld", offset, (long)total,
                        (long long)(entry_end - offset));
            goto fail;
        }
        PyObject *entry = BatchEntryType->tp_alloc(BatchEntryType, 3);
        if (entry == NULL) goto fail;
        PyObject *item;
        if ((item = PyBytes_FromStringAndSize((const char *)buf + body_start, body_len)) == NULL)
            goto fail_entry;
        PyTuple_SET_ITEM(entry, 0, item);
        if ((item = PyLong_FromLong(flag)) == NULL) goto fail_entry;
        PyTuple_SET_ITEM(entry, 1, item);
        if ((item = utf8(buf + props_len_pos + 2, (Py_ssize_t)props_len, "properties")) == NULL)
            goto fail_entry;
        PyTuple_SET_ITEM(entry, 2, item);
        if (append_new(entries, entry) < 0) goto fail;
        offset = (Py_ssize_t)entry_end;
        continue;
    fail_entry:
        Py_DECREF(entry);
        goto fail;
    }
    goto done;
fail:
    Py_CLEAR(entries);
done:
    PyBuffer_Release(&view);
    return entries;
}

/* A growable byte buffer (PyMem). */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
} scratch;

static int scratch_put(scratch *s, const char *p, Py_ssize_t n) {
    if (n == 0) return 0;
    if (s->cap - s->len < n) {
        Py_ssize_t cap = s->cap ? s->cap : 1024;
        while (cap - s->len < n) {
            if (cap > PY_SSIZE_T_MAX / 2) {
                PyErr_NoMemory();
                return -1;
            }
            cap *= 2;
        }
        char *data = PyMem_Realloc(s->data, (size_t)cap);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->data = data;
        s->cap = cap;
    }
    memcpy(s->data + s->len, p, (size_t)n);
    s->len += n;
    return 0;
}

/* The fields of a Message or MessageExt (not a subclass: a property there
 * could stand for a slot) into `slots` (borrowed): 0 for anything else, or
 * when a slot is unset (Python raises AttributeError then). */
static int message_slots(PyObject *m, PyObject **slots) {
    if (!Py_IS_TYPE(m, MessageType) && !Py_IS_TYPE(m, MessageExtType)) return 0;
    for (int i = 0; i < N_MESSAGE_FIELDS; i++)
        if ((slots[i] = SLOT(m, i)) == NULL) return 0;
    return 1;
}

/* The encoded properties of one message appended to `s`: 1 done, 0 not a
 * shape handled here (the Python twin decides), -1 error. */
static int put_properties(scratch *s, PyObject *props) {
    if (!PyDict_CheckExact(props)) return 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(props, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value)) return 0;
        Py_ssize_t klen, vlen;
        Py_INCREF(key);
        Py_INCREF(value);
        const char *k = PyUnicode_AsUTF8AndSize(key, &klen);
        const char *v = k == NULL ? NULL : PyUnicode_AsUTF8AndSize(value, &vlen);
        int rc = v == NULL ? -2
                 : (scratch_put(s, k, klen) < 0 || scratch_put(s, "\x01", 1) < 0 ||
                    scratch_put(s, v, vlen) < 0 || scratch_put(s, "\x02", 1) < 0)
                     ? -1
                     : 0;
        Py_DECREF(key);
        Py_DECREF(value);
        if (rc == -1) return -1;
        if (rc == -2) goto encode_error;
    }
    return 1;
encode_error:
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
    PyErr_Clear();
    return 0; /* lone surrogates: Python raises its own UnicodeEncodeError */
}

typedef struct {
    PyObject *body; /* a strong reference */
    int32_t flag;
    Py_ssize_t props_at, props_len;
} batch_item;

static PyObject *encode_batch(PyObject *self, PyObject *messages) {
    if (check_configured() < 0) return NULL;
    if (!PyList_CheckExact(messages) && !PyTuple_CheckExact(messages))
        return PyObject_CallOneArg(py_encode_batch, messages);
    /* a tuple cannot change; a list is copied so that it cannot either */
    PyObject *seq = PySequence_Tuple(messages);
    if (seq == NULL) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(seq);
    batch_item *items = PyMem_New(batch_item, count ? count : 1);
    scratch props = {NULL, 0, 0};
    PyObject *result = NULL;
    int fallback = 0;
    Py_ssize_t total = 0, held = 0;
    if (items == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *slots[N_MESSAGE_FIELDS];
        if (!message_slots(PyTuple_GET_ITEM(seq, i), slots) || !PyBytes_CheckExact(slots[1]) ||
            !PyLong_CheckExact(slots[2])) {
            fallback = 1;
            break;
        }
        int overflow;
        long long flag = PyLong_AsLongLongAndOverflow(slots[2], &overflow);
        if (overflow || flag < INT32_MIN || flag > INT32_MAX) {
            fallback = 1;
            break;
        }
        Py_ssize_t at = props.len;
        int put = put_properties(&props, slots[3]);
        if (put < 0) goto done;
        Py_ssize_t body_len = PyBytes_GET_SIZE(slots[1]), props_len = props.len - at;
        if (put == 0 || props_len > MAX_PROPS || body_len > INT32_MAX - BATCH_FIXED - MAX_PROPS) {
            fallback = 1; /* Python raises the ValueError */
            break;
        }
        items[i] = (batch_item){Py_NewRef(slots[1]), (int32_t)flag, at, props_len};
        held = i + 1;
        total += BATCH_FIXED + body_len + props_len;
    }
    if (fallback) {
        result = PyObject_CallOneArg(py_encode_batch, seq);
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL) goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < count; i++) {
        batch_item *it = &items[i];
        Py_ssize_t body_len = PyBytes_GET_SIZE(it->body);
        put_i32(out, (int32_t)(BATCH_FIXED + body_len + it->props_len));
        put_i32(out + 4, 0);
        put_i32(out + 8, 0);
        put_i32(out + 12, it->flag);
        put_i32(out + 16, (int32_t)body_len);
        out += BATCH_HEAD;
        memcpy(out, PyBytes_AS_STRING(it->body), (size_t)body_len);
        out += body_len;
        put_i16(out, (int16_t)it->props_len);
        out += 2;
        if (it->props_len > 0) memcpy(out, props.data + it->props_at, (size_t)it->props_len);
        out += it->props_len;
    }
done:
    for (Py_ssize_t i = 0; i < held; i++) Py_DECREF(items[i].body);
    PyMem_Free(items);
    PyMem_Free(props.data);
    Py_DECREF(seq);
    return result;
}

/* -- batch checks ----------------------------------------------------------- */

/* A property of a str-keyed dict: 1 found (*value borrowed), 0 absent, -1 error. */
static int get_str_property(PyObject *dict, PyObject *key, PyObject **value) {
    *value = PyDict_GetItemWithError(dict, key);
    if (*value == NULL) return PyErr_Occurred() ? -1 : 0;
    return 1;
}

static int str_equals(PyObject *s, PyObject *literal) {
    return PyUnicode_GET_LENGTH(s) == PyUnicode_GET_LENGTH(literal) &&
           PyUnicode_Compare(s, literal) == 0;
}

static PyObject *batch_unique_ids(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "batch_unique_ids(messages, topic, wait, make_unique_id)");
        return NULL;
    }
    if (check_configured() < 0) return NULL;
    PyObject *messages = args[0], *topic = args[1], *make_id = args[3];
    int wait = PyObject_IsTrue(args[2]);
    if (wait < 0) return NULL;
    if ((!PyList_CheckExact(messages) && !PyTuple_CheckExact(messages)) ||
        !PyUnicode_CheckExact(topic))
        Py_RETURN_NONE;
    PyObject *seq = PySequence_Tuple(messages);
    if (seq == NULL) return NULL;
    PyObject *ids = PyList_New(0);
    if (ids == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *slots[N_MESSAGE_FIELDS];
        if (!message_slots(PyTuple_GET_ITEM(seq, i), slots)) goto none;
        PyObject *m_topic = slots[0], *body = slots[1], *props = slots[3], *value;
        if (!PyUnicode_CheckExact(m_topic) || !str_equals(m_topic, topic)) goto none;
        if (!PyDict_CheckExact(props) || !PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) == 0)
            goto none;
        int found = get_str_property(props, s_DELAY, &value);
        if (found < 0) goto fail;
        if (found && (!PyUnicode_CheckExact(value) ||
                      (PyUnicode_GET_LENGTH(value) != 0 && !str_equals(value, s_zero))))
            goto none;
        if ((found = get_str_property(props, s_WAIT, &value)) < 0) goto fail;
        if (found && !PyUnicode_CheckExact(value)) goto none;
        if ((found ? wait_value_waits(value) : 1) != wait) goto none;
        if ((found = get_str_property(props, s_UNIQ_KEY, &value)) < 0) goto fail;
        if (found && !PyUnicode_CheckExact(value)) goto none;
        if (found && PyUnicode_GET_LENGTH(value) > 0) {
            Py_INCREF(value);
        } else {
            Py_INCREF(props); /* held across a call into Python */
            value = PyObject_CallNoArgs(make_id);
            int rc = value == NULL ? -1 : PyDict_SetItem(props, s_UNIQ_KEY, value);
            Py_DECREF(props);
            if (rc < 0) {
                Py_XDECREF(value);
                goto fail;
            }
        }
        if (append_new(ids, value) < 0) goto fail;
    }
    Py_DECREF(seq);
    return ids;
none:
    Py_DECREF(seq);
    Py_DECREF(ids);
    Py_RETURN_NONE;
fail:
    Py_DECREF(seq);
    Py_XDECREF(ids);
    return NULL;
}

/* -- configure --------------------------------------------------------------- */

static int slot_offset(PyTypeObject *cls, const char *name, Py_ssize_t *offset) {
    PyObject *descr = PyObject_GetAttrString((PyObject *)cls, name);
    if (descr == NULL) return -1;
    int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type);
    if (ok) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        ok = member->type == T_OBJECT_EX && !(member->flags & READONLY) &&
             member->offset >= (Py_ssize_t)sizeof(PyObject) &&
             member->offset + (Py_ssize_t)sizeof(PyObject *) <= cls->tp_basicsize;
        *offset = member->offset;
    }
    Py_DECREF(descr);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a plain slot", cls->tp_name, name);
        return -1;
    }
    return 0;
}

static int check_class(PyObject *obj, const char *what) {
    if (!PyType_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a class", what);
        return -1;
    }
    return 0;
}

static PyObject *configure(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"protocol_error", "message", "message_ext", "record_columns",
                            "batch_entry", "inflate", "host_text", "crc32", "decode_records",
                            "decode_record_columns", "encode_batch", "split_batch", NULL};
    PyObject *o[12];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$OOOOOOOOOOOO:configure", names, &o[0], &o[1],
                                     &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9],
                                     &o[10], &o[11]))
        return NULL;
    if (check_class(o[1], "message") < 0 || check_class(o[2], "message_ext") < 0 ||
        check_class(o[3], "record_columns") < 0 || check_class(o[4], "batch_entry") < 0)
        return NULL;
    PyTypeObject *message = (PyTypeObject *)o[1], *ext = (PyTypeObject *)o[2];
    PyTypeObject *entry = (PyTypeObject *)o[4];
    if (!PyType_IsSubtype(ext, message)) {
        PyErr_SetString(PyExc_TypeError, "message_ext must subclass message");
        return NULL;
    }
    /* MessageExt: exactly the slots listed above, nothing else (no __dict__,
     * no __weakref__), so that an object made here is complete */
    Py_ssize_t offsets[N_EXT_FIELDS];
    for (int i = 0; i < N_EXT_FIELDS; i++) {
        if (slot_offset(ext, EXT_FIELDS[i], &offsets[i]) < 0) return NULL;
        for (int j = 0; j < i; j++)
            if (offsets[j] == offsets[i]) {
                PyErr_SetString(PyExc_TypeError, "message_ext slots overlap");
                return NULL;
            }
    }
    if (ext->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + N_EXT_FIELDS * sizeof(PyObject *)) ||
        ext->tp_itemsize != 0 || ext->tp_dictoffset != 0 || ext->tp_weaklistoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "message_ext has fields this module does not know");
        return NULL;
    }
    for (int i = 0; i < N_MESSAGE_FIELDS; i++) {
        Py_ssize_t offset;
        if (slot_offset(message, EXT_FIELDS[i], &offset) < 0) return NULL;
        if (offset != offsets[i]) {
            PyErr_SetString(PyExc_TypeError, "message and message_ext slots differ");
            return NULL;
        }
    }
    if (!PyType_IsSubtype(entry, &PyTuple_Type) || entry->tp_basicsize != PyTuple_Type.tp_basicsize ||
        entry->tp_itemsize != PyTuple_Type.tp_itemsize || entry->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "batch_entry must be a plain tuple subclass");
        return NULL;
    }
    for (int i = 0; i < N_EXT_FIELDS; i++) ext_offset[i] = offsets[i];
    Py_XSETREF(ProtocolError, Py_NewRef(o[0]));
    Py_XSETREF(MessageType, (PyTypeObject *)Py_NewRef(o[1]));
    Py_XSETREF(MessageExtType, (PyTypeObject *)Py_NewRef(o[2]));
    Py_XSETREF(RecordColumnsType, Py_NewRef(o[3]));
    Py_XSETREF(BatchEntryType, (PyTypeObject *)Py_NewRef(o[4]));
    Py_XSETREF(py_inflate, Py_NewRef(o[5]));
    Py_XSETREF(py_host_text, Py_NewRef(o[6]));
    Py_XSETREF(py_crc32, Py_NewRef(o[7]));
    Py_XSETREF(py_decode_records, Py_NewRef(o[8]));
    Py_XSETREF(py_decode_record_columns, Py_NewRef(o[9]));
    Py_XSETREF(py_encode_batch, Py_NewRef(o[10]));
    Py_XSETREF(py_split_batch, Py_NewRef(o[11]));
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "configure(*, protocol_error, message, message_ext, record_columns, batch_entry, inflate, "
     "host_text, crc32, decode_records, decode_record_columns, encode_batch, split_batch)"},
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_VARARGS | METH_KEYWORDS,
     "decode_records(buf, *, verify_crc=False, decompress=False) -> list[MessageExt]"},
    {"decode_record_columns", (PyCFunction)(void (*)(void))decode_record_columns,
     METH_VARARGS | METH_KEYWORDS, "decode_record_columns(buf, *, decompress=True) -> RecordColumns"},
    {"encode_batch", (PyCFunction)encode_batch, METH_O, "encode_batch(messages) -> bytes"},
    {"split_batch", (PyCFunction)split_batch, METH_O, "split_batch(body) -> list[BatchEntry]"},
    {"batch_unique_ids", (PyCFunction)(void (*)(void))batch_unique_ids, METH_FASTCALL,
     "batch_unique_ids(messages, topic, wait, make_unique_id) -> list[str] | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tidemq.record._records",
    "Compiled twins of the client-side record codecs (see tidemq.record.records).", -1, methods,
};

PyMODINIT_FUNC PyInit__records(void) {
    if (s_DELAY == NULL) {
        s_DELAY = PyUnicode_InternFromString("DELAY");
        s_WAIT = PyUnicode_InternFromString("WAIT");
        s_UNIQ_KEY = PyUnicode_InternFromString("UNIQ_KEY");
        s_zero = PyUnicode_InternFromString("0");
        if (!s_DELAY || !s_WAIT || !s_UNIQ_KEY || !s_zero) return NULL;
    }
    return PyModule_Create(&module);
}
