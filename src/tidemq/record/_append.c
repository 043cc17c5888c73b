/* The broker's batch append, compiled: a SEND_BATCH_MESSAGE body in, the
 * commitlog records, consumequeue entries and index entries out, in one pass
 * and without a Python object per message.
 *
 * The pure-Python twin is tidemq/record/batch_append.py (`encode_batch_records`);
 * it is the reference, and the property tests hold this file to it byte for
 * byte. Anything unusual (a property string that is not plain well-formed
 * ASCII, a key that needs the broker's attention such as a delay level, a
 * transaction flag or a delivery time, or a malformed entry) makes the
 * function return None: the caller then takes the general path, which stores
 * what it can and explains what it refuses.
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

/* Keys whose presence sends a batch to the general path ("key\x01" anywhere,
 * as the broker's own substring pre-check finds them). */
static const char *const DIVERTING_KEYS[] = {
    "TRAN_MSG\x01", "DELAY\x01", "TIMER_DELAY_SEC\x01", "TIMER_DELAY_MS\x01",
    "TIMER_DELIVER_MS\x01", "__STARTDELIVERTIME\x01", NULL,
};

static PyObject *encode_batch_records(PyObject *self, PyObject *args) {
    Py_buffer body, topic, born_host, store_host, cluster, stamp = {0};
    int queue_id, sys_flag, born_port, store_port;
    long long first_queue_offset, physical_offset, born_ts, store_ts;
    PyObject *result = NULL;
    Entry *entries = NULL;
    Out index = {0}, ids = {0};
    PyObject *tags = NULL, *records = NULL, *cq = NULL;
    if (!PyArg_ParseTuple(args, "y*y*iLLiLy*iLy*iy*|y*:encode_batch_records", &body, &topic,
                          &queue_id, &first_queue_offset, &physical_offset, &sys_flag,
                          &born_ts, &born_host, &born_port, &store_ts, &store_host,
                          &store_port, &cluster, &stamp))
        return NULL;
    const unsigned char *b = body.buf;
    const unsigned char *t = topic.buf;
    Py_ssize_t topic_len = topic.len;
    int topic_ascii = 1;
    for (Py_ssize_t i = 0; i < topic_len; i++) topic_ascii &= t[i] < 0x80;
    if (!topic_ascii || topic_len > 127 || (born_host.len != 4 && born_host.len != 16) ||
        (store_host.len != 4 && store_host.len != 16) || cluster.len > MAX_PROPS ||
        !plain_well_formed((Span){cluster.buf, cluster.len}) || stamp.len > MAX_PROPS ||
        !plain_well_formed((Span){stamp.buf, stamp.len})) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    Py_ssize_t count = cut_entries(b, body.len, &entries);
    if (count < 0) goto done;
    if (count == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    /* Check every entry first (the batch is all or nothing) and size the
     * records, so they are written once, straight into the bytes returned. */
    Py_ssize_t fixed = 88 + (born_host.len - 4) + (store_host.len - 4);
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const unsigned char *p = b + entries[i].props_start;
        Py_ssize_t n = entries[i].props_len;
        int diverted = !plain_well_formed((Span){p, n});
        if (!diverted) diverted = span_contains_any((Span){p, n}, DIVERTING_KEYS);
        if (!diverted) diverted = holds_stamped_key((Span){p, n}, (Span){stamp.buf, stamp.len});
        int add_cluster = !span_contains_any((Span){p, n}, CLUSTER_KEY);
        if (!diverted && n + (add_cluster ? cluster.len : 0) + stamp.len > MAX_PROPS) diverted = 1;
        if (diverted) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        Py_ssize_t size = fixed + entries[i].body_len + 1 + topic_len + 2 + n + (add_cluster ? cluster.len : 0) + stamp.len;
        if (size > INT32_MAX || total > PY_SSIZE_T_MAX - size) {
            PyErr_SetString(PyExc_ValueError, "record too large");
            goto done;
        }
        total += size;
    }
    records = PyBytes_FromStringAndSize(NULL, total);
    cq = PyBytes_FromStringAndSize(NULL, 20 * count);
    if (!records || !cq) goto done;
    unsigned char *rec_base = (unsigned char *)PyBytes_AS_STRING(records);
    unsigned char *cq_base = (unsigned char *)PyBytes_AS_STRING(cq);
    Py_ssize_t written = 0;
    int v6_bits = (born_host.len == 16 ? BORNHOST_V6 : 0) | (store_host.len == 16 ? STOREHOST_V6 : 0);
    int32_t flags = (int32_t)((sys_flag & ~(BORNHOST_V6 | STOREHOST_V6)) | v6_bits);
    uint32_t topic_hash = java_hash_bytes(0, t, topic_len);
    topic_hash = topic_hash * 31u + (unsigned char)'#';
    char host_id[64];
    Py_ssize_t prefix_len = id_prefix(host_id, store_host.buf, store_host.len, store_port);
    tags = PyDict_New();
    if (!tags) goto done;
    long long phys = physical_offset;
    for (Py_ssize_t i = 0; i < count; i++) {
        const Entry *e = &entries[i];
        const unsigned char *p = b + e->props_start;
        Py_ssize_t plen = e->props_len;
        int add_cluster = !span_contains_any((Span){p, plen}, CLUSTER_KEY);
        Py_ssize_t stored_plen = plen + (add_cluster ? cluster.len : 0) + stamp.len;
        Py_ssize_t size = fixed + e->body_len + 1 + topic_len + 2 + stored_plen;
        long long queue_offset = first_queue_offset + i;
        unsigned char *r = rec_base + written;
        const unsigned char *body_ptr = b + e->body_start;
        uint32_t crc = (uint32_t)crc32(0L, body_ptr, (uInt)e->body_len) & 0x7FFFFFFFu;
        put_i32(r, (int32_t)size);
        put_i32(r + 4, MAGIC_V1);
        put_i32(r + 8, (int32_t)crc);
        put_i32(r + 12, queue_id);
        put_i32(r + 16, e->flag);
        put_i64(r + 20, queue_offset);
        put_i64(r + 28, phys);
        put_i32(r + 36, flags);
        put_i64(r + 40, born_ts);
        unsigned char *q = r + 48;
        memcpy(q, born_host.buf, (size_t)born_host.len);
        q += born_host.len;
        put_i32(q, born_port);
        q += 4;
        put_i64(q, store_ts);
        q += 8;
        memcpy(q, store_host.buf, (size_t)store_host.len);
        q += store_host.len;
        put_i32(q, store_port);
        q += 4;
        put_i32(q, 0); /* RECONSUMETIMES */
        put_i64(q + 4, 0); /* PREPARED TRANSACTION OFFSET */
        put_i32(q + 12, (int32_t)e->body_len);
        q += 16;
        memcpy(q, body_ptr, (size_t)e->body_len);
        q += e->body_len;
        *q++ = (unsigned char)topic_len;
        memcpy(q, t, (size_t)topic_len);
        q += topic_len;
        put_i16(q, (int16_t)stored_plen);
        q += 2;
        memcpy(q, p, (size_t)plen);
        q += plen;
        if (add_cluster) {
            memcpy(q, cluster.buf, (size_t)cluster.len);
            q += cluster.len;
        }
        if (stamp.len) {
            memcpy(q, stamp.buf, (size_t)stamp.len);
            q += stamp.len;
        }
        written += size;

        /* consumequeue entry: physical offset, size, tags code */
        Span props = {p, plen}, tag_text;
        int64_t tags_code = 0;
        if (find_value(props, "TAGS", &tag_text) && tag_text.n > 0)
            tags_code = (int32_t)java_hash_bytes(0, tag_text.p, tag_text.n);
        unsigned char *c = cq_base + 20 * i;
        put_i64(c, phys);
        put_i32(c + 8, (int32_t)size);
        put_i64(c + 12, tags_code);
        {
            PyObject *code = PyLong_FromLongLong(tags_code);
            PyObject *at = PyLong_FromLongLong(queue_offset);
            int failed = !code || !at || PyDict_SetItem(tags, code, at) < 0;
            Py_XDECREF(code);
            Py_XDECREF(at);
            if (failed) goto done;
        }

        /* index entries: the unique key, then each key, without repeats */
        Span unique_key = {NULL, 0}, keys = {NULL, 0};
        int has_unique = find_value(props, "UNIQ_KEY", &unique_key);
        int has_keys = find_value(props, "KEYS", &keys);
        int indexed = index_record(&index, topic_hash, unique_key, has_unique, keys, has_keys, phys);
        if (indexed < 0) goto done;
        if (indexed > 0) goto too_many_keys;

        if (out_reserve(&ids, prefix_len + 17) < 0) goto done;
        if (i) ids.data[ids.len++] = ',';
        memcpy(ids.data + ids.len, host_id, (size_t)prefix_len);
        ids.len += prefix_len;
        snprintf((char *)ids.data + ids.len, 17, "%016llX", (unsigned long long)phys);
        ids.len += 16;
        phys += size;
    }
    static const char nothing[1] = "";
    result = Py_BuildValue("(OOy#s#nO)", records, cq,
                           index.data ? (char *)index.data : nothing, index.len,
                           ids.data ? (char *)ids.data : nothing, ids.len, count, tags);
    goto done;
too_many_keys:
    /* More distinct keys than the fast path holds: the general path indexes them. */
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(tags);
    Py_XDECREF(records);
    Py_XDECREF(cq);
    PyMem_Free(entries);
    PyMem_Free(index.data);
    PyMem_Free(ids.data);
    PyBuffer_Release(&body);
    PyBuffer_Release(&topic);
    PyBuffer_Release(&born_host);
    PyBuffer_Release(&store_host);
    PyBuffer_Release(&cluster);
    PyBuffer_Release(&stamp);
    return result;
}

/* Index entries of a batch into one index file (the mapped bytes of the whole
 * file), each at the head of its slot's chain; the twin is IndexFile.put in
 * tidemq/store/index.py, entry by entry. `header` is (beginTimestamp,
 * endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount);
 * the new header is returned. Only the entries, the slots and (with the first
 * entry) beginTimestamp are written: the caller writes the header tail. */
static PyObject *index_put_run(PyObject *self, PyObject *args) {
    Py_buffer file, items;
    Py_ssize_t slot_count, entries_pos;
    long long begin_ts, end_ts, begin_phy, end_phy, store_ts;
    int hash_slot_count, index_count;
    if (!PyArg_ParseTuple(args, "w*nn(LLLLii)y*L:index_put_run", &file, &slot_count,
                          &entries_pos, &begin_ts, &end_ts, &begin_phy, &end_phy,
                          &hash_slot_count, &index_count, &items, &store_ts))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = items.len / 12;
    unsigned char *f = file.buf;
    if (items.len % 12 || slot_count <= 0 || index_count < 1 || entries_pos < 40 + slot_count * 4 ||
        entries_pos + ((Py_ssize_t)index_count + n) * 20 > file.len) {
        PyErr_SetString(PyExc_ValueError, "index entries do not fit the file");
        goto done;
    }
    const unsigned char *it = items.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t phy = be_i64(it + 12 * i);
        int32_t key_hash = be_i32(it + 12 * i + 8);
        if (key_hash < 0) {
            PyErr_SetString(PyExc_ValueError, "negative key hash");
            goto done;
        }
        int32_t number = index_count;
        if (number == 1) {
            begin_ts = store_ts;
            begin_phy = phy;
            put_i64(f, store_ts);
        }
        Py_ssize_t slot_pos = 40 + (Py_ssize_t)(key_hash % slot_count) * 4;
        int32_t head = be_i32(f + slot_pos);
        if (head <= 0 || head >= number) {
            head = 0;
            hash_slot_count++;
        }
        long long diff = store_ts - begin_ts;
        diff = diff < 0 ? 0 : diff / 1000;
        if (diff > INT32_MAX) diff = INT32_MAX;
        unsigned char *e = f + entries_pos + (Py_ssize_t)number * 20;
        put_i32(e, key_hash);
        put_i64(e + 4, phy);
        put_i32(e + 12, (int32_t)diff);
        put_i32(e + 16, head);
        put_i32(f + slot_pos, number);
        index_count = number + 1;
        end_phy = phy;
        if (store_ts > end_ts) end_ts = store_ts;
    }
    result = Py_BuildValue("(LLLLii)", begin_ts, end_ts, begin_phy, end_phy, hash_slot_count,
                           index_count);
done:
    PyBuffer_Release(&file);
    PyBuffer_Release(&items);
    return result;
}

/* The store's append of a group of single messages, compiled: the twin of
 * encode_group_records in tidemq/record/group_append.py (the reference; the
 * property tests hold this function to it). Any message the fast path does
 * not take makes the whole call return None: the store's general path then
 * stores, refuses or raises, with every check. */

#define GROUP_FIELDS 12
static const char *const GROUP_FIELD_NAMES[GROUP_FIELDS] = {
    "topic", "queue_id", "body", "properties", "flag", "sys_flag", "born_timestamp",
    "born_host", "born_port", "reconsume_times", "prepared_transaction_offset", "tags_code",
};
enum { F_TOPIC, F_QUEUE, F_BODY, F_PROPS, F_FLAG, F_SYSFLAG, F_BORN_TS, F_BORN_HOST,
       F_BORN_PORT, F_RECONSUME, F_PREPARED, F_TAGS };
static PyObject *group_field_names[GROUP_FIELDS];

typedef struct {
    PyObject *topic;
    PyObject *queue_id;
    long long queue_value;
    long long first, next;
    Out cq;
    PyObject *tags;
} QueueSlot;

/* An int in [low, high] into *out: 1, or 0 when it is not an int or out of range. */
static int int_in(PyObject *value, long long low, long long high, long long *out) {
    if (!PyLong_Check(value)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (v < low || v > high) return 0;
    *out = v;
    return 1;
}

static void free_slots(QueueSlot *slots, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyMem_Free(slots[i].cq.data);
        Py_XDECREF(slots[i].tags);
        Py_XDECREF(slots[i].topic);
        Py_XDECREF(slots[i].queue_id);
    }
    PyMem_Free(slots);
}

static PyObject *encode_group_records(PyObject *self, PyObject *args) {
    PyObject *messages, *queue_offsets, *rule_topics, *make_result, *ok;
    long long physical_offset, room, store_ts, max_body;
    Py_buffer store_host;
    int store_port;
    if (!PyArg_ParseTuple(args, "OLLLy*iO!LOOO:encode_group_records", &messages, &physical_offset,
                          &room, &store_ts, &store_host, &store_port, &PyDict_Type, &queue_offsets,
                          &max_body, &rule_topics, &make_result, &ok))
        return NULL;
    PyObject *result = NULL, *seq = NULL, *records = NULL, *results = NULL, *queues = NULL;
    PyObject *fields[GROUP_FIELDS] = {0};
    Py_buffer body = {0};
    QueueSlot *slots = NULL;
    Py_ssize_t nslots = 0;
    Out rec = {0}, index = {0};
    long long index_bound = 0;
    /* A tuple of our own: the result builder is Python code, and nothing it
     * does to the caller's list can move the items under this loop. */
    seq = PySequence_Tuple(messages);
    if (!seq) goto done;
    Py_ssize_t count = PyTuple_GET_SIZE(seq);
    if (count == 0 || (store_host.len != 4 && store_host.len != 16)) goto decline;
    results = PyTuple_New(count);
    slots = PyMem_Calloc((size_t)count, sizeof(QueueSlot));
    if (!results || !slots) {
        if (!slots) PyErr_NoMemory();
        goto done;
    }
    char host_id[64];
    Py_ssize_t prefix_len = id_prefix(host_id, store_host.buf, store_host.len, store_port);
    PyObject **items = &PyTuple_GET_ITEM(seq, 0);
    long long phys = physical_offset;
    for (Py_ssize_t i = 0; i < count; i++) {
        for (int f = 0; f < GROUP_FIELDS; f++) {
            fields[f] = PyObject_GetAttr(items[i], group_field_names[f]);
            if (!fields[f]) goto done;
        }
        PyObject *topic = fields[F_TOPIC], *props_obj = fields[F_PROPS];
        long long queue_id, flag, sys_flag, born_ts, born_port, reconsume, prepared, tags_code = 0;
        if (!PyUnicode_CheckExact(topic) || !PyUnicode_IS_ASCII(topic) ||
            PyUnicode_GET_LENGTH(topic) == 0 || PyUnicode_GET_LENGTH(topic) > 127 ||
            !int_in(fields[F_QUEUE], INT32_MIN, INT32_MAX, &queue_id) ||
            !PyUnicode_CheckExact(props_obj) || !PyUnicode_IS_ASCII(props_obj) ||
            PyUnicode_GET_LENGTH(props_obj) > MAX_PROPS ||
            !int_in(fields[F_FLAG], INT32_MIN, INT32_MAX, &flag) ||
            !int_in(fields[F_SYSFLAG], INT32_MIN, INT32_MAX, &sys_flag) ||
            ((sys_flag & 0xC) != 0 && (sys_flag & 0xC) != 0x8) ||
            !int_in(fields[F_BORN_TS], INT64_MIN, INT64_MAX, &born_ts) ||
            !PyBytes_Check(fields[F_BORN_HOST]) ||
            (PyBytes_GET_SIZE(fields[F_BORN_HOST]) != 4 && PyBytes_GET_SIZE(fields[F_BORN_HOST]) != 16) ||
            !int_in(fields[F_BORN_PORT], INT32_MIN, INT32_MAX, &born_port) ||
            !int_in(fields[F_RECONSUME], INT32_MIN, INT32_MAX, &reconsume) ||
            !int_in(fields[F_PREPARED], INT64_MIN, INT64_MAX, &prepared) ||
            (fields[F_TAGS] != Py_None && !int_in(fields[F_TAGS], INT64_MIN, INT64_MAX, &tags_code)))
            goto decline;
        Span props = {(const unsigned char *)PyUnicode_DATA(props_obj), PyUnicode_GET_LENGTH(props_obj)};
        if (!plain_well_formed(props)) goto decline;
        if (PyObject_GetBuffer(fields[F_BODY], &body, PyBUF_SIMPLE) < 0) {
            PyErr_Clear();
            goto decline;
        }
        if (body.len > max_body) goto decline;

        /* the queue: a slot of this group, or the store's next offset */
        QueueSlot *slot = NULL;
        for (Py_ssize_t s = 0; s < nslots && !slot; s++) {
            if (slots[s].queue_value != queue_id) continue;
            if (slots[s].topic == topic) {
                slot = &slots[s];
                continue;
            }
            int same = PyUnicode_Compare(slots[s].topic, topic);
            if (same == -1 && PyErr_Occurred()) goto done;
            if (same == 0) slot = &slots[s];
        }
        if (!slot) {
            PyObject *key = PyTuple_Pack(2, topic, fields[F_QUEUE]);
            if (!key) goto done;
            PyObject *known = PyDict_GetItemWithError(queue_offsets, key);
            Py_DECREF(key);
            if (!known) {
                if (PyErr_Occurred()) goto done;
                goto decline;
            }
            long long first;
            if (!int_in(known, INT64_MIN, INT64_MAX, &first)) goto decline;
            slot = &slots[nslots++];
            Py_INCREF(topic);
            slot->topic = topic;
            Py_INCREF(fields[F_QUEUE]);
            slot->queue_id = fields[F_QUEUE];
            slot->queue_value = queue_id;
            slot->first = slot->next = first;
            slot->tags = PyDict_New();
            if (!slot->tags) goto done;
        }
        if (fields[F_TAGS] == Py_None) {
            int rule = PySequence_Contains(rule_topics, topic);
            if (rule < 0) goto done;
            if (rule) goto decline;
            Span tag_text;
            if (find_value(props, "TAGS", &tag_text) && tag_text.n > 0)
                tags_code = (int32_t)java_hash_bytes(0, tag_text.p, tag_text.n);
        }

        /* the record */
        const unsigned char *t = (const unsigned char *)PyUnicode_DATA(topic);
        Py_ssize_t topic_len = PyUnicode_GET_LENGTH(topic);
        const char *born_host = PyBytes_AS_STRING(fields[F_BORN_HOST]);
        Py_ssize_t born_len = PyBytes_GET_SIZE(fields[F_BORN_HOST]);
        Py_ssize_t size = 88 + (born_len - 4) + (store_host.len - 4) + body.len + 1 + topic_len + 2 + props.n;
        if (size > INT32_MAX || phys - physical_offset + size > room) goto decline;
        long long queue_offset = slot->next;
        if (out_reserve(&rec, size) < 0) goto done;
        unsigned char *r = rec.data + rec.len;
        int v6_bits = (born_len == 16 ? BORNHOST_V6 : 0) | (store_host.len == 16 ? STOREHOST_V6 : 0);
        uint32_t crc = (uint32_t)crc32(0L, body.buf, (uInt)body.len) & 0x7FFFFFFFu;
        put_i32(r, (int32_t)size);
        put_i32(r + 4, MAGIC_V1);
        put_i32(r + 8, (int32_t)crc);
        put_i32(r + 12, (int32_t)queue_id);
        put_i32(r + 16, (int32_t)flag);
        put_i64(r + 20, queue_offset);
        put_i64(r + 28, phys);
        put_i32(r + 36, (int32_t)((sys_flag & ~(BORNHOST_V6 | STOREHOST_V6)) | v6_bits));
        put_i64(r + 40, born_ts);
        unsigned char *q = r + 48;
        memcpy(q, born_host, (size_t)born_len);
        q += born_len;
        put_i32(q, (int32_t)born_port);
        q += 4;
        put_i64(q, store_ts);
        q += 8;
        memcpy(q, store_host.buf, (size_t)store_host.len);
        q += store_host.len;
        put_i32(q, store_port);
        q += 4;
        put_i32(q, (int32_t)reconsume);
        put_i64(q + 4, prepared);
        put_i32(q + 12, (int32_t)body.len);
        q += 16;
        memcpy(q, body.buf, (size_t)body.len);
        q += body.len;
        *q++ = (unsigned char)topic_len;
        memcpy(q, t, (size_t)topic_len);
        q += topic_len;
        put_i16(q, (int16_t)props.n);
        q += 2;
        memcpy(q, props.p, (size_t)props.n);
        PyBuffer_Release(&body);

        /* index entries (the unique key, then each key, without repeats) */
        Span unique_key = {NULL, 0}, keys = {NULL, 0};
        int has_unique = find_value(props, "UNIQ_KEY", &unique_key);
        int has_keys = find_value(props, "KEYS", &keys);
        uint32_t topic_hash = java_hash_bytes(0, t, topic_len) * 31u + (unsigned char)'#';
        int indexed = index_record(&index, topic_hash, unique_key, has_unique, keys, has_keys, phys);
        if (indexed < 0) goto done;
        if (indexed > 0) goto decline;
        if (has_unique && unique_key.n > 0) index_bound += 1;
        if (has_keys && keys.n > 0) {
            index_bound += 1;
            for (Py_ssize_t k = 0; k < keys.n; k++) index_bound += keys.p[k] == ' ';
        }

        /* consumequeue entry and the queue's tags */
        if (out_reserve(&slot->cq, 20) < 0) goto done;
        unsigned char *c = slot->cq.data + slot->cq.len;
        put_i64(c, phys);
        put_i32(c + 8, (int32_t)size);
        put_i64(c + 12, tags_code);
        slot->cq.len += 20;
        {
            PyObject *code = PyLong_FromLongLong(tags_code);
            PyObject *at = PyLong_FromLongLong(queue_offset);
            int failed = !code || !at || PyDict_SetItem(slot->tags, code, at) < 0;
            Py_XDECREF(code);
            Py_XDECREF(at);
            if (failed) goto done;
        }
        slot->next = queue_offset + 1;
        rec.len += size;

        /* the result */
        char msg_id[96];
        memcpy(msg_id, host_id, (size_t)prefix_len);
        snprintf(msg_id + prefix_len, 17, "%016llX", (unsigned long long)phys);
        PyObject *call_args[6];
        call_args[0] = ok;
        call_args[1] = PyLong_FromLongLong(phys);
        call_args[2] = PyLong_FromSsize_t(size);
        call_args[3] = PyLong_FromLongLong(queue_offset);
        call_args[4] = PyLong_FromLongLong(store_ts);
        call_args[5] = PyUnicode_FromStringAndSize(msg_id, prefix_len + 16);
        PyObject *one = NULL;
        if (call_args[1] && call_args[2] && call_args[3] && call_args[4] && call_args[5])
            one = PyObject_Vectorcall(make_result, call_args, 6, NULL);
        for (int a = 1; a < 6; a++) Py_XDECREF(call_args[a]);
        if (!one) goto done;
        PyTuple_SET_ITEM(results, i, one);
        phys += size;
        for (int f = 0; f < GROUP_FIELDS; f++) Py_CLEAR(fields[f]);
    }
    records = PyBytes_FromStringAndSize(rec.data ? (char *)rec.data : "", rec.len);
    queues = PyList_New(nslots);
    if (!records || !queues) goto done;
    for (Py_ssize_t s = 0; s < nslots; s++) {
        PyObject *part = Py_BuildValue("(OOLy#O)", slots[s].topic, slots[s].queue_id, slots[s].first,
                                       (char *)slots[s].cq.data, slots[s].cq.len, slots[s].tags);
        if (!part) goto done;
        PyList_SET_ITEM(queues, s, part);
    }
    result = Py_BuildValue("(OOOy#L)", records, results, queues,
                           index.data ? (char *)index.data : "", index.len, index_bound);
    goto done;
decline:
    result = Py_None;
    Py_INCREF(result);
done:
    if (body.obj) PyBuffer_Release(&body);
    for (int f = 0; f < GROUP_FIELDS; f++) Py_XDECREF(fields[f]);
    if (slots) free_slots(slots, nslots);
    Py_XDECREF(seq);
    Py_XDECREF(records);
    Py_XDECREF(results);
    Py_XDECREF(queues);
    PyMem_Free(rec.data);
    PyMem_Free(index.data);
    PyBuffer_Release(&store_host);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_batch_records", encode_batch_records, METH_VARARGS,
     "encode_batch_records(body, topic, queue_id, first_queue_offset, physical_offset, sys_flag,"
     " born_ts, born_host, born_port, store_ts, store_host, store_port, cluster_property,"
     " stamp_properties=b'')"
     " -> (records, cq_entries, index_entries, msg_ids, count, {tags_code: last queue offset})"
     " | None"},
    {"encode_group_records", encode_group_records, METH_VARARGS,
     "encode_group_records(messages, physical_offset, room, store_ts, store_host, store_port,"
     " queue_offsets, max_body, rule_topics, make_result, ok)"
     " -> (records, results, [(topic, queue_id, first, cq_entries, tags)], index_entries,"
     " index_bound) | None"},
    {"index_put_run", index_put_run, METH_VARARGS,
     "index_put_run(file, slot_count, entries_pos, header, packed_entries, store_timestamp)"
     " -> header"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tidemq.record._append",
                                    "The broker's batch append, compiled (twin: batch_append.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__append(void) {
    for (int f = 0; f < GROUP_FIELDS; f++) {
        group_field_names[f] = PyUnicode_InternFromString(GROUP_FIELD_NAMES[f]);
        if (!group_field_names[f]) return NULL;
    }
    return PyModule_Create(&module);
}
