/* Transactional records, compiled: a batch of halves as one run of records in
 * the half topic, and the committed messages and op records of many ENDs as
 * one run, each in one call and without a Python object per message.
 *
 * The pure-Python twin is tidemq/record/transaction_records.py; it is the
 * reference, and the property tests hold this file to it byte for byte.
 * Anything unusual (a property string that is not plain ASCII, a key the
 * broker must refuse or act on, a half that is missing or does not match its
 * END, a run that does not fit the current commitlog file...) makes a
 * function return None: the caller then takes its general path, which
 * stores what it can and explains what it refuses.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <zlib.h>

#include "_native_common.h"
#include "_property_text.h"
#include "_batch_body.h"

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define BORNHOST_V6 0x10
#define STOREHOST_V6 0x20
#define TRANSACTION_MASK 0x0C
#define TRANSACTION_COMMIT 0x08
#define MAX_V1_TOPIC 127

/* Keys a half cannot carry, or that need a look before it is refused
 * (BrokerTransactions.prepare): "key\x01" anywhere sends the batch to the
 * general path. */
static const char *const HALF_DIVERTING_KEYS[] = {
    "DELAY\x01", "TIMER_DELAY_SEC\x01", "TIMER_DELAY_MS\x01", "TIMER_DELIVER_MS\x01",
    "__STARTDELIVERTIME\x01", NULL,
};

static Span buffer_span(const Py_buffer *b) {
    Span s = {(const unsigned char *)b->buf, b->len};
    return s;
}

static int host_ok(const Py_buffer *b) { return b->len == 4 || b->len == 16; }

/* TOTALSIZE of a v1 record (Java's calMsgLength). */
static Py_ssize_t v1_size(Py_ssize_t born_len, Py_ssize_t store_len, Py_ssize_t body,
                          Py_ssize_t topic, Py_ssize_t props) {
    return 88 + (born_len - 4) + (store_len - 4) + body + 1 + topic + 2 + props;
}

typedef struct {
    int32_t queue_id, flag, sys_flag, born_port, store_port, reconsume;
    int64_t queue_offset, phys, born_ts, store_ts;
    Span born_host, store_host, body, topic;
} Fields;

/* Write a v1 record's fixed part, body, topic and properties length at `r`
 * (the V6 bits of SYSFLAG follow the host lengths, as encode_record sets
 * them); returns where the properties go. */
static unsigned char *write_head(unsigned char *r, Py_ssize_t size, const Fields *f,
                                 Py_ssize_t props_len) {
    int32_t v6 = (f->born_host.n == 16 ? BORNHOST_V6 : 0) | (f->store_host.n == 16 ? STOREHOST_V6 : 0);
    uint32_t crc = (uint32_t)crc32(0L, f->body.p, (uInt)f->body.n) & 0x7FFFFFFFu;
    put_i32(r, (int32_t)size);
    put_i32(r + 4, MAGIC_V1);
    put_i32(r + 8, (int32_t)crc);
    put_i32(r + 12, f->queue_id);
    put_i32(r + 16, f->flag);
    put_i64(r + 20, f->queue_offset);
    put_i64(r + 28, f->phys);
    put_i32(r + 36, (f->sys_flag & ~(BORNHOST_V6 | STOREHOST_V6)) | v6);
    put_i64(r + 40, f->born_ts);
    unsigned char *q = r + 48;
    memcpy(q, f->born_host.p, (size_t)f->born_host.n);
    q += f->born_host.n;
    put_i32(q, f->born_port);
    q += 4;
    put_i64(q, f->store_ts);
    q += 8;
    memcpy(q, f->store_host.p, (size_t)f->store_host.n);
    q += f->store_host.n;
    put_i32(q, f->store_port);
    q += 4;
    put_i32(q, f->reconsume);
    put_i64(q + 4, 0); /* PREPARED TRANSACTION OFFSET */
    put_i32(q + 12, (int32_t)f->body.n);
    q += 16;
    memcpy(q, f->body.p, (size_t)f->body.n);
    q += f->body.n;
    *q++ = (unsigned char)f->topic.n;
    memcpy(q, f->topic.p, (size_t)f->topic.n);
    q += f->topic.n;
    put_i16(q, (int16_t)props_len);
    return q + 2;
}

static int64_t tags_code_of(Span props) {
    Span v;
    if (find_value(props, "TAGS", &v) && v.n > 0) return (int32_t)java_hash_bytes(0, v.p, v.n);
    return 0;
}

/* {tags code: queue offset}[code] = offset; -1 on a memory error. */
static int note_tags(PyObject *tags, int64_t code, long long queue_offset) {
    PyObject *k = PyLong_FromLongLong(code);
    PyObject *v = PyLong_FromLongLong(queue_offset);
    int failed = !k || !v || PyDict_SetItem(tags, k, v) < 0;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return failed ? -1 : 0;
}

/* How many index entries the store's general path reserves room for, for a
 * record with these properties (room.index_entries_bound: its unique key
 * and each of its keys, repeats counted). */
static Py_ssize_t index_bound_of(Span props) {
    Span v;
    Py_ssize_t bound = 0;
    if (find_value(props, "UNIQ_KEY", &v) && v.n > 0) bound++;
    if (find_value(props, "KEYS", &v) && v.n > 0) {
        bound++;
        for (Py_ssize_t i = 0; i < v.n; i++) bound += v.p[i] == ' ';
    }
    return bound;
}

static uint32_t topic_hash_of(Span topic) {
    return java_hash_bytes(0, topic.p, topic.n) * 31u + (unsigned char)'#';
}

/* ---------------------------------------------------------------- halves */


static int is_half_update(Span name, int add_group) {
    return span_equals(name, "REAL_TOPIC") || span_equals(name, "REAL_QID") ||
           span_equals(name, "__transactionId__") || (add_group && span_equals(name, "PGROUP"));
}

static Py_ssize_t put_item(unsigned char *out, Py_ssize_t at, const char *key, Span value) {
    Py_ssize_t k = (Py_ssize_t)strlen(key);
    if (out) {
        memcpy(out + at, key, (size_t)k);
        out[at + k] = 0x01;
        memcpy(out + at + k + 1, value.p, (size_t)value.n);
        out[at + k + 1 + value.n] = 0x02;
    }
    return k + 1 + value.n + 1;
}

/* The half's property string (BrokerTransactions.prepare on the stored
 * properties `pieces`, the sent string and the CLUSTER item the broker adds):
 * every non-empty item kept but those the updates replace, then REAL_TOPIC,
 * REAL_QID, PGROUP (when the message had none, or an empty one) and
 * __transactionId__ (its UNIQ_KEY) appended. Returns the length; writes the
 * bytes to `out` unless it is NULL. */
static Py_ssize_t half_properties(const Span *pieces, int npieces, Span topic, Span qid,
                                  Span group, int add_group, Span key, unsigned char *out) {
    Py_ssize_t len = 0;
    for (int k = 0; k < npieces; k++) {
        const unsigned char *p = pieces[k].p;
        Py_ssize_t n = pieces[k].n, i = 0;
        while (i < n) {
            const unsigned char *end = memchr(p + i, 0x02, (size_t)(n - i));
            Py_ssize_t item_end = end ? (Py_ssize_t)(end - p) : n;
            Py_ssize_t item_len = item_end - i;
            if (item_len > 0) {
                const unsigned char *sep = memchr(p + i, 0x01, (size_t)item_len);
                Span name = {p + i, sep ? (Py_ssize_t)(sep - (p + i)) : 0};
                if (!sep || !is_half_update(name, add_group)) {
                    if (out) {
                        memcpy(out + len, p + i, (size_t)item_len);
                        out[len + item_len] = 0x02;
                    }
                    len += item_len + 1;
                }
            }
            i = item_end + 1;
        }
    }
    len += put_item(out, len, "REAL_TOPIC", topic);
    len += put_item(out, len, "REAL_QID", qid);
    if (add_group) len += put_item(out, len, "PGROUP", group);
    len += put_item(out, len, "__transactionId__", key);
    return len;
}

typedef struct {
    Span pieces[3];
    int npieces, add_group;
    Span key;
    Py_ssize_t props_len, size;
} HalfPlan;

static PyObject *encode_half_records(PyObject *self, PyObject *args) {
    Py_buffer body, half_topic, real_topic, group, born_host, store_host, cluster, stamp = {0};
    int real_qid, sys_flag, born_port, store_port;
    long long first_queue_offset, physical_offset, born_ts, store_ts;
    Py_ssize_t room, max_body;
    PyObject *result = NULL, *records = NULL, *cq = NULL, *tags = NULL;
    Entry *entries = NULL;
    HalfPlan *plans = NULL;
    Out index = {0}, ids = {0};
    if (!PyArg_ParseTuple(args, "y*y*y*iy*LLnniLy*iLy*iy*|y*:encode_half_records", &body,
                          &half_topic, &real_topic, &real_qid, &group, &first_queue_offset,
                          &physical_offset, &room, &max_body, &sys_flag, &born_ts, &born_host,
                          &born_port, &store_ts, &store_host, &store_port, &cluster, &stamp))
        return NULL;
    Span topic = buffer_span(&half_topic), real = buffer_span(&real_topic);
    Span group_s = buffer_span(&group), cluster_s = buffer_span(&cluster);
    Span stamp_s = buffer_span(&stamp);
    if (topic.n == 0 || topic.n > MAX_V1_TOPIC || !span_ascii(topic) || !host_ok(&born_host) ||
        !host_ok(&store_host) || cluster_s.n > MAX_PROPS || !plain_well_formed(cluster_s) ||
        stamp_s.n > MAX_PROPS || !plain_well_formed(stamp_s) ||
        real.n == 0 || !plain_value(real) || !plain_value(group_s) || real_qid < 0)
        goto general;
    char qid_text[16];
    Span qid = {(const unsigned char *)qid_text, snprintf(qid_text, sizeof qid_text, "%d", real_qid)};
    const unsigned char *b = body.buf;
    Py_ssize_t count = cut_entries(b, body.len, &entries);
    if (count < 0) goto done;
    if (count == 0) goto general;
    plans = PyMem_Malloc(sizeof(HalfPlan) * (size_t)count);
    if (!plans) {
        PyErr_NoMemory();
        goto done;
    }
    /* Check every entry and size its record first (the batch is all or nothing). */
    Py_ssize_t fixed_len = 88 + (born_host.len - 4) + (store_host.len - 4);
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Span raw = {b + entries[i].props_start, entries[i].props_len};
        if (!plain_well_formed(raw) || entries[i].body_len > max_body) goto general;
        if (span_contains_any(raw, HALF_DIVERTING_KEYS)) goto general;
        if (holds_stamped_key(raw, stamp_s)) goto general;
        HalfPlan *plan = &plans[i];
        plan->pieces[0] = raw;
        plan->npieces = 1;
        if (!span_contains_any(raw, CLUSTER_KEY)) plan->pieces[plan->npieces++] = cluster_s;
        if (stamp_s.n) plan->pieces[plan->npieces++] = stamp_s;
        Span key = {NULL, 0}, pgroup = {NULL, 0}, v;
        int has_key = 0, has_group = 0;
        for (int k = 0; k < plan->npieces; k++) {
            if (find_value(plan->pieces[k], "UNIQ_KEY", &v)) has_key = 1, key = v;
            if (find_value(plan->pieces[k], "PGROUP", &v)) has_group = 1, pgroup = v;
        }
        if (!has_key || key.n == 0) goto general; /* the general path makes one */
        plan->key = key;
        plan->add_group = !has_group || pgroup.n == 0;
        plan->props_len = half_properties(plan->pieces, plan->npieces, real, qid, group_s,
                                          plan->add_group, key, NULL);
        if (plan->props_len > MAX_PROPS) goto general;
        plan->size = fixed_len + entries[i].body_len + 1 + topic.n + 2 + plan->props_len;
        total += plan->size;
        if (total > room) goto general;
    }
    records = PyBytes_FromStringAndSize(NULL, total);
    cq = PyBytes_FromStringAndSize(NULL, 20 * count);
    tags = PyDict_New();
    if (!records || !cq || !tags) goto done;
    unsigned char *rec = (unsigned char *)PyBytes_AS_STRING(records);
    unsigned char *cq_at = (unsigned char *)PyBytes_AS_STRING(cq);
    uint32_t topic_hash = topic_hash_of(topic);
    char prefix[64];
    Py_ssize_t prefix_len = id_prefix(prefix, store_host.buf, store_host.len, store_port);
    Fields f = {0};
    f.queue_id = 0;
    f.sys_flag = sys_flag & ~TRANSACTION_MASK;
    f.born_port = born_port;
    f.store_port = store_port;
    f.born_ts = born_ts;
    f.store_ts = store_ts;
    f.born_host = buffer_span(&born_host);
    f.store_host = buffer_span(&store_host);
    f.topic = topic;
    long long phys = physical_offset;
    Py_ssize_t bound = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const HalfPlan *plan = &plans[i];
        long long queue_offset = first_queue_offset + i;
        f.flag = entries[i].flag;
        f.queue_offset = queue_offset;
        f.phys = phys;
        f.body.p = b + entries[i].body_start;
        f.body.n = entries[i].body_len;
        unsigned char *props_at = write_head(rec, plan->size, &f, plan->props_len);
        half_properties(plan->pieces, plan->npieces, real, qid, group_s, plan->add_group,
                        plan->key, props_at);
        Span props = {props_at, plan->props_len};
        int64_t code = tags_code_of(props);
        bound += index_bound_of(props);
        put_i64(cq_at, phys);
        put_i32(cq_at + 8, (int32_t)plan->size);
        put_i64(cq_at + 12, code);
        if (note_tags(tags, code, queue_offset) < 0) goto done;
        Span unique, keys;
        int has_unique = find_value(props, "UNIQ_KEY", &unique);
        int has_keys = find_value(props, "KEYS", &keys);
        int indexed = index_record(&index, topic_hash, unique, has_unique, keys, has_keys, phys);
        if (indexed < 0) goto done;
        if (indexed > 0) goto general;
        if (out_reserve(&ids, prefix_len + 18) < 0) goto done;
        if (i) ids.data[ids.len++] = ',';
        memcpy(ids.data + ids.len, prefix, (size_t)prefix_len);
        ids.len += prefix_len;
        snprintf((char *)ids.data + ids.len, 17, "%016llX", (unsigned long long)phys);
        ids.len += 16;
        rec += plan->size;
        cq_at += 20;
        phys += plan->size;
    }
    static const char nothing[1] = "";
    result = Py_BuildValue("(OOy#s#nOn)", records, cq, index.data ? (char *)index.data : nothing,
                           index.len, ids.data ? (char *)ids.data : nothing, ids.len, count, tags,
                           bound);
    goto done;
general:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(records);
    Py_XDECREF(cq);
    Py_XDECREF(tags);
    PyMem_Free(entries);
    PyMem_Free(plans);
    PyMem_Free(index.data);
    PyMem_Free(ids.data);
    PyBuffer_Release(&body);
    PyBuffer_Release(&half_topic);
    PyBuffer_Release(&real_topic);
    PyBuffer_Release(&group);
    PyBuffer_Release(&born_host);
    PyBuffer_Release(&store_host);
    PyBuffer_Release(&cluster);
    PyBuffer_Release(&stamp);
    return result;
}

/* ------------------------------------------------------------------ ends */

typedef struct {
    long long start;
    Py_buffer view;
} LogFile;

typedef struct {
    PyObject *topic; /* str */
    Span name;
    int queue_id;
    long long first, next;
    Out cq;
    PyObject *tags;
    long long committed, committed_bytes;
} QueueRun;

typedef struct {
    const unsigned char *rec;
    int commit;
    int born_len, half_store_len;
    Span props, key, body, real_topic;
    int real_qid;
    int queue, op_queue;
    long long half_queue_offset;
    Py_ssize_t committed_size, op_size, op_props_len;
    char op_body[24];
    int op_body_len;
} EndPlan;

/* A topic the committed copy may go to by this path: a valid plain name
 * (letters, digits, `_-%|`), v1-short, not one whose consumequeue tag slot
 * the store fills otherwise. */
static int plain_topic(Span t, PyObject *special) {
    if (t.n == 0 || t.n > MAX_V1_TOPIC) return 0;
    for (Py_ssize_t i = 0; i < t.n; i++) {
        unsigned char c = t.p[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '%' || c == '|';
        if (!ok) return 0;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(special);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(special, i);
        if (PyBytes_GET_SIZE(s) == t.n && memcmp(PyBytes_AS_STRING(s), t.p, (size_t)t.n) == 0)
            return 0;
    }
    return 1;
}

/* REAL_QID as the general path reads it (ASCII digits), short enough for an int32. */
static int parse_qid(Span v, int *out) {
    if (v.n == 0 || v.n > 9) return 0;
    int value = 0;
    for (Py_ssize_t i = 0; i < v.n; i++) {
        if (v.p[i] < '0' || v.p[i] > '9') return 0;
        value = value * 10 + (v.p[i] - '0');
    }
    *out = value;
    return 1;
}

/* The queue run of (topic, queue id), made on first use with the queue's next
 * offset from `queue_offsets`; its index, or -1 on an error. */
static int queue_of(QueueRun **runs, int *count, int *cap, Span topic, int queue_id,
                    PyObject *queue_offsets) {
    for (int i = *count - 1; i >= 0; i--) {
        QueueRun *q = &(*runs)[i];
        if (q->queue_id == queue_id && q->name.n == topic.n &&
            memcmp(q->name.p, topic.p, (size_t)topic.n) == 0)
            return i;
    }
    if (*count == *cap) {
        int grown = *cap ? *cap * 2 : 8;
        QueueRun *more = PyMem_Realloc(*runs, sizeof(QueueRun) * (size_t)grown);
        if (!more) {
            PyErr_NoMemory();
            return -1;
        }
        *runs = more;
        *cap = grown;
    }
    QueueRun *q = &(*runs)[*count];
    memset(q, 0, sizeof *q);
    q->topic = PyUnicode_DecodeASCII((const char *)topic.p, topic.n, NULL);
    if (!q->topic) return -1;
    (*count)++;
    q->name = topic;
    q->queue_id = queue_id;
    PyObject *key = Py_BuildValue("(Oi)", q->topic, queue_id);
    if (!key) return -1;
    PyObject *found = PyDict_GetItemWithError(queue_offsets, key);
    Py_DECREF(key);
    if (found) {
        q->first = PyLong_AsLongLong(found);
        if (q->first == -1 && PyErr_Occurred()) return -1;
    } else if (PyErr_Occurred()) {
        return -1;
    }
    q->next = q->first;
    q->tags = PyDict_New();
    return q->tags ? *count - 1 : -1;
}

/* The half an END names, read where `offset` lies in the written log and
 * checked as decode_half and the END's checks do; 0 when anything differs
 * (the general path then answers with Java's remark). */
static int read_half(const LogFile *files, Py_ssize_t nfiles, long long offset,
                     long long queue_offset, Span half_topic, Span group, EndPlan *h) {
    const LogFile *file = NULL;
    for (Py_ssize_t i = nfiles - 1; i >= 0; i--) {
        if (files[i].start <= offset && offset < files[i].start + files[i].view.len) {
            file = &files[i];
            break;
        }
    }
    if (!file) return 0;
    Py_ssize_t pos = (Py_ssize_t)(offset - file->start), written = file->view.len;
    const unsigned char *rec = (const unsigned char *)file->view.buf + pos;
    if (pos + 88 > written) return 0;
    int32_t size = be_i32(rec);
    if (be_i32(rec + 4) != MAGIC_V1 || size < 88 || size > written - pos) return 0;
    int32_t flags = be_i32(rec + 36);
    int born_len = flags & BORNHOST_V6 ? 16 : 4, store_len = flags & STOREHOST_V6 ? 16 : 4;
    Py_ssize_t fixed = 80 + born_len + store_len;
    if (size < fixed) return 0;
    int32_t body_len = be_i32(rec + fixed - 4);
    if (body_len < 0 || body_len > size - fixed - 1) return 0;
    Py_ssize_t topic_pos = fixed + body_len;
    int8_t topic_len = (int8_t)rec[topic_pos];
    if (topic_len < 0) return 0;
    Py_ssize_t props_pos = topic_pos + 1 + topic_len;
    if (props_pos + 2 > size) return 0;
    int16_t props_len = be_i16(rec + props_pos);
    if (props_len < 0 || props_pos + 2 + props_len != size) return 0;
    Span topic = {rec + topic_pos + 1, topic_len};
    if (topic.n != half_topic.n || memcmp(topic.p, half_topic.p, (size_t)topic.n) != 0) return 0;
    if (be_i64(rec + 28) != offset || be_i64(rec + 20) != queue_offset) return 0;
    Span props = {rec + props_pos + 2, props_len};
    if (!span_ascii(props)) return 0;
    Span v;
    if (!find_value(props, "PGROUP", &v) || v.n != group.n || memcmp(v.p, group.p, (size_t)v.n))
        return 0;
    if (!find_value(props, "UNIQ_KEY", &h->key) || h->key.n == 0) return 0;
    if (be_i32(rec + 48 + born_len) < 0) return 0; /* a born port the general path cannot parse */
    h->rec = rec;
    h->born_len = born_len;
    h->half_store_len = store_len;
    h->props = props;
    h->body.p = rec + fixed;
    h->body.n = body_len;
    h->half_queue_offset = queue_offset;
    return 1;
}

static void free_runs(QueueRun *runs, int count) {
    for (int i = 0; i < count; i++) {
        Py_XDECREF(runs[i].topic);
        Py_XDECREF(runs[i].tags);
        PyMem_Free(runs[i].cq.data);
    }
    PyMem_Free(runs);
}

static PyObject *encode_end_records(PyObject *self, PyObject *args) {
    PyObject *log_files, *items, *special, *queue_offsets;
    Py_buffer group, half_topic, op_topic, store_host, op_born_host;
    long long physical_offset, store_ts;
    Py_ssize_t room, max_body;
    int store_port, op_born_port;
    if (!PyArg_ParseTuple(args, "OOy*y*y*O!LnnLy*iy*iO!:encode_end_records", &log_files, &items,
                          &group, &half_topic, &op_topic, &PyTuple_Type, &special,
                          &physical_offset, &room, &max_body, &store_ts, &store_host,
                          &store_port, &op_born_host, &op_born_port, &PyDict_Type, &queue_offsets))
        return NULL;
    PyObject *result = NULL, *files_seq = NULL, *items_seq = NULL, *records = NULL;
    PyObject *keys = NULL, *queues = NULL;
    LogFile *files = NULL;
    Py_ssize_t nfiles = 0, opened = 0;
    EndPlan *plans = NULL;
    QueueRun *runs = NULL;
    int nruns = 0, cap_runs = 0;
    Out index = {0};
    Span group_s = buffer_span(&group), half_s = buffer_span(&half_topic);
    Span op_s = buffer_span(&op_topic);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(special); i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(special, i))) {
            PyErr_SetString(PyExc_TypeError, "special topics must be bytes");
            goto done;
        }
    }
    if (!host_ok(&store_host) || !host_ok(&op_born_host) || half_s.n == 0 || op_s.n == 0 ||
        op_s.n > MAX_V1_TOPIC || !plain_value(op_s))
        goto general;
    files_seq = PySequence_Fast(log_files, "log_files must be a sequence");
    items_seq = PySequence_Fast(items, "items must be a sequence");
    if (!files_seq || !items_seq) goto done;
    nfiles = PySequence_Fast_GET_SIZE(files_seq);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items_seq);
    if (count == 0) goto general;
    files = PyMem_Calloc((size_t)(nfiles ? nfiles : 1), sizeof(LogFile));
    plans = PyMem_Calloc((size_t)count, sizeof(EndPlan));
    if (!files || !plans) {
        PyErr_NoMemory();
        goto done;
    }
    for (; opened < nfiles; opened++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(files_seq, opened);
        if (!PyArg_ParseTuple(pair, "Ly*:log file", &files[opened].start, &files[opened].view))
            goto done;
    }
    /* Pass 1: find and check every half, and size the run. */
    Py_ssize_t store_len = store_host.len, total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(items_seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 ||
            !PyLong_Check(PyTuple_GET_ITEM(item, 0)) || !PyLong_Check(PyTuple_GET_ITEM(item, 1)))
            goto general;
        int overflow = 0;
        long long offset = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(item, 0), &overflow);
        if (overflow || (offset == -1 && PyErr_Occurred())) goto general_clear;
        long long queue_offset = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(item, 1), &overflow);
        if (overflow || (queue_offset == -1 && PyErr_Occurred())) goto general_clear;
        int commit = PyObject_IsTrue(PyTuple_GET_ITEM(item, 2));
        if (commit < 0) goto done;
        EndPlan *h = &plans[i];
        if (!read_half(files, nfiles, offset, queue_offset, half_s, group_s, h)) goto general;
        if (h->body.n > max_body) goto general;
        h->commit = commit;
        if (commit) {
            Span topic, raw_qid;
            if (!find_value(h->props, "REAL_TOPIC", &topic) || !plain_topic(topic, special))
                goto general;
            if (!find_value(h->props, "REAL_QID", &raw_qid) || !parse_qid(raw_qid, &h->real_qid))
                goto general;
            h->real_topic = topic;
            h->queue = queue_of(&runs, &nruns, &cap_runs, topic, h->real_qid, queue_offsets);
            if (h->queue < 0) goto done;
            h->committed_size = v1_size(h->born_len, store_len, h->body.n, topic.n, h->props.n);
            total += h->committed_size;
        }
        h->op_queue = queue_of(&runs, &nruns, &cap_runs, op_s, 0, queue_offsets);
        if (h->op_queue < 0) goto done;
        h->op_body_len = snprintf(h->op_body, sizeof h->op_body, "%lld", h->half_queue_offset);
        h->op_props_len = 12 + h->key.n + 1; /* TAGS\x01d\x02KEYS\x01 key \x02 */
        if (h->op_props_len > MAX_PROPS) goto general;
        h->op_size = v1_size(op_born_host.len, store_len, h->op_body_len, op_s.n, h->op_props_len);
        total += h->op_size;
        if (total > room) goto general;
    }
    /* Pass 2: write the run, its consumequeue entries and index entries. */
    records = PyBytes_FromStringAndSize(NULL, total);
    keys = PyList_New(count);
    if (!records || !keys) goto done;
    unsigned char *rec = (unsigned char *)PyBytes_AS_STRING(records);
    long long phys = physical_offset;
    Py_ssize_t bound = 0;
    uint32_t op_hash = topic_hash_of(op_s);
    for (Py_ssize_t i = 0; i < count; i++) {
        const EndPlan *h = &plans[i];
        const unsigned char *half = h->rec;
        PyObject *key = PyUnicode_DecodeASCII((const char *)h->key.p, h->key.n, NULL);
        if (!key) goto done;
        PyList_SET_ITEM(keys, i, key);
        Span unique, more;
        if (h->commit) {
            QueueRun *q = &runs[h->queue];
            Fields f = {0};
            const unsigned char *after_born = half + 48 + h->born_len;
            f.queue_id = h->real_qid;
            f.flag = be_i32(half + 16);
            f.queue_offset = q->next;
            f.phys = phys;
            f.sys_flag = (be_i32(half + 36) & ~TRANSACTION_MASK) | TRANSACTION_COMMIT;
            f.born_ts = be_i64(half + 40);
            f.born_host.p = half + 48;
            f.born_host.n = h->born_len;
            f.born_port = be_i32(after_born);
            f.store_ts = store_ts;
            f.store_host = buffer_span(&store_host);
            f.store_port = store_port;
            f.reconsume = be_i32(after_born + 4 + 8 + h->half_store_len + 4);
            f.body = h->body;
            f.topic = h->real_topic;
            unsigned char *props_at = write_head(rec, h->committed_size, &f, h->props.n);
            memcpy(props_at, h->props.p, (size_t)h->props.n);
            int64_t code = tags_code_of(h->props);
            bound += index_bound_of(h->props);
            if (out_reserve(&q->cq, 20) < 0) goto done;
            put_i64(q->cq.data + q->cq.len, phys);
            put_i32(q->cq.data + q->cq.len + 8, (int32_t)h->committed_size);
            put_i64(q->cq.data + q->cq.len + 12, code);
            q->cq.len += 20;
            if (note_tags(q->tags, code, q->next) < 0) goto done;
            int has_unique = find_value(h->props, "UNIQ_KEY", &unique);
            int has_keys = find_value(h->props, "KEYS", &more);
            int indexed = index_record(&index, topic_hash_of(h->real_topic), unique, has_unique,
                                       more, has_keys, phys);
            if (indexed < 0) goto done;
            if (indexed > 0) goto general;
            q->next++;
            q->committed++;
            q->committed_bytes += h->body.n;
            rec += h->committed_size;
            phys += h->committed_size;
        }
        QueueRun *q = &runs[h->op_queue];
        Fields f = {0};
        f.queue_id = 0;
        f.queue_offset = q->next;
        f.phys = phys;
        f.born_ts = be_i64(half + 52 + h->born_len); /* the half's store time */
        f.born_host = buffer_span(&op_born_host);
        f.born_port = op_born_port;
        f.store_ts = store_ts;
        f.store_host = buffer_span(&store_host);
        f.store_port = store_port;
        f.body.p = (const unsigned char *)h->op_body;
        f.body.n = h->op_body_len;
        f.topic = op_s;
        unsigned char *props_at = write_head(rec, h->op_size, &f, h->op_props_len);
        memcpy(props_at, "TAGS\x01" "d\x02KEYS\x01", 12);
        memcpy(props_at + 12, h->key.p, (size_t)h->key.n);
        props_at[12 + h->key.n] = 0x02;
        Span op_props = {props_at, h->op_props_len};
        int64_t code = tags_code_of(op_props);
        bound += index_bound_of(op_props);
        if (out_reserve(&q->cq, 20) < 0) goto done;
        put_i64(q->cq.data + q->cq.len, phys);
        put_i32(q->cq.data + q->cq.len + 8, (int32_t)h->op_size);
        put_i64(q->cq.data + q->cq.len + 12, code);
        q->cq.len += 20;
        if (note_tags(q->tags, code, q->next) < 0) goto done;
        int has_unique = find_value(op_props, "UNIQ_KEY", &unique);
        int has_keys = find_value(op_props, "KEYS", &more);
        int indexed = index_record(&index, op_hash, unique, has_unique, more, has_keys, phys);
        if (indexed < 0) goto done;
        if (indexed > 0) goto general;
        q->next++;
        rec += h->op_size;
        phys += h->op_size;
    }
    queues = PyList_New(nruns);
    if (!queues) goto done;
    for (int i = 0; i < nruns; i++) {
        QueueRun *q = &runs[i];
        PyObject *run = Py_BuildValue("(OiLy#OLL)", q->topic, q->queue_id, q->first,
                                      q->cq.data ? (char *)q->cq.data : "", q->cq.len, q->tags,
                                      q->committed, q->committed_bytes);
        if (!run) goto done;
        PyList_SET_ITEM(queues, i, run);
    }
    long long op_first = runs[plans[0].op_queue].first;
    static const char nothing[1] = "";
    result = Py_BuildValue("(OOy#OLn)", records, queues, index.data ? (char *)index.data : nothing,
                           index.len, keys, op_first, bound);
    goto done;
general_clear:
    PyErr_Clear();
general:
    result = Py_None;
    Py_INCREF(result);
done:
    for (Py_ssize_t i = 0; i < opened; i++) PyBuffer_Release(&files[i].view);
    PyMem_Free(files);
    PyMem_Free(plans);
    free_runs(runs, nruns);
    PyMem_Free(index.data);
    Py_XDECREF(files_seq);
    Py_XDECREF(items_seq);
    Py_XDECREF(records);
    Py_XDECREF(keys);
    Py_XDECREF(queues);
    PyBuffer_Release(&group);
    PyBuffer_Release(&half_topic);
    PyBuffer_Release(&op_topic);
    PyBuffer_Release(&store_host);
    PyBuffer_Release(&op_born_host);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_half_records", encode_half_records, METH_VARARGS,
     "encode_half_records(body, half_topic, real_topic, real_queue_id, producer_group,"
     " first_queue_offset, physical_offset, room, max_body_size, sys_flag, born_ts, born_host,"
     " born_port, store_ts, store_host, store_port, cluster_property,"
     " stamp_properties=b'')"
     " -> (records, cq_entries, index_entries, msg_ids, count, {tags_code: last queue offset},"
     " index_bound) | None"},
    {"encode_end_records", encode_end_records, METH_VARARGS,
     "encode_end_records(log_files, items, producer_group, half_topic, op_topic, special_topics,"
     " physical_offset, room, max_body_size, store_ts, store_host, store_port, op_born_host,"
     " op_born_port, queue_offsets)"
     " -> (records, [(topic, queue_id, first_queue_offset, cq_entries, {tags_code: offset},"
     " committed, committed_body_bytes)], index_entries, keys, op_first_queue_offset,"
     " index_bound) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tidemq.record._transactions",
                                    "Transactional record runs, compiled (twin: transaction_records.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__transactions(void) { return PyModule_Create(&module); }
