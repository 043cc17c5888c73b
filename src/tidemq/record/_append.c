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
static const char CLUSTER_KEY[] = "CLUSTER\x01";


static PyObject *encode_batch_records(PyObject *self, PyObject *args) {
    Py_buffer body, topic, born_host, store_host, cluster;
    int queue_id, sys_flag, born_port, store_port;
    long long first_queue_offset, physical_offset, born_ts, store_ts;
    PyObject *result = NULL;
    Entry *entries = NULL;
    Out index = {0}, ids = {0};
    PyObject *tags = NULL, *records = NULL, *cq = NULL;
    if (!PyArg_ParseTuple(args, "y*y*iLLiLy*iLy*iy*:encode_batch_records", &body, &topic,
                          &queue_id, &first_queue_offset, &physical_offset, &sys_flag,
                          &born_ts, &born_host, &born_port, &store_ts, &store_host,
                          &store_port, &cluster))
        return NULL;
    const unsigned char *b = body.buf;
    const unsigned char *t = topic.buf;
    Py_ssize_t topic_len = topic.len;
    int topic_ascii = 1;
    for (Py_ssize_t i = 0; i < topic_len; i++) topic_ascii &= t[i] < 0x80;
    if (!topic_ascii || topic_len > 127 || (born_host.len != 4 && born_host.len != 16) ||
        (store_host.len != 4 && store_host.len != 16) || cluster.len > MAX_PROPS ||
        !plain_well_formed((Span){cluster.buf, cluster.len})) {
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
        for (int k = 0; !diverted && DIVERTING_KEYS[k]; k++) diverted = span_contains((Span){p, n}, DIVERTING_KEYS[k]);
        int add_cluster = !span_contains((Span){p, n}, CLUSTER_KEY);
        if (!diverted && add_cluster && n + cluster.len > MAX_PROPS) diverted = 1;
        if (diverted) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        Py_ssize_t size = fixed + entries[i].body_len + 1 + topic_len + 2 + n + (add_cluster ? cluster.len : 0);
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
        int add_cluster = !span_contains((Span){p, plen}, CLUSTER_KEY);
        Py_ssize_t stored_plen = plen + (add_cluster ? cluster.len : 0);
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

static PyMethodDef methods[] = {
    {"encode_batch_records", encode_batch_records, METH_VARARGS,
     "encode_batch_records(body, topic, queue_id, first_queue_offset, physical_offset, sys_flag,"
     " born_ts, born_host, born_port, store_ts, store_host, store_port, cluster_property)"
     " -> (records, cq_entries, index_entries, msg_ids, count, {tags_code: last queue offset})"
     " | None"},
    {"index_put_run", index_put_run, METH_VARARGS,
     "index_put_run(file, slot_count, entries_pos, header, packed_entries, store_timestamp)"
     " -> header"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tidemq.record._append",
                                    "The broker's batch append, compiled (twin: batch_append.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__append(void) { return PyModule_Create(&module); }
