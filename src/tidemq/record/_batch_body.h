/* The entries of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessages:
 * TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLENGTH, BODY, PROPERTIESLENGTH,
 * PROPERTIES per message), cut without copying, for the compiled record
 * builders (_append.c, _transactions.c). */
#ifndef TIDEMQ_BATCH_BODY_H
#define TIDEMQ_BATCH_BODY_H
#include <Python.h>
#include <stdint.h>

#include "_native_common.h"

#define BATCH_FIXED 22 /* TOTALSIZE MAGIC BODYCRC FLAG BODYLENGTH + PROPERTIESLENGTH */

typedef struct {
    Py_ssize_t body_start, body_len, props_start, props_len;
    int32_t flag;
} Entry;

/* Cut a batch body into entries (`*out`, freed by the caller with PyMem_Free);
 * 0 when it is malformed or empty, -1 on a memory error. */
static inline Py_ssize_t cut_entries(const unsigned char *b, Py_ssize_t end, Entry **out) {
    Py_ssize_t count = 0, cap = 64, off = 0;
    Entry *entries = PyMem_Malloc(sizeof(Entry) * (size_t)cap);
    if (!entries) {
        PyErr_NoMemory();
        return -1;
    }
    while (off < end) {
        if (end - off < BATCH_FIXED) goto malformed;
        int32_t total = be_i32(b + off);
        int32_t flag = be_i32(b + off + 12);
        int32_t body_len = be_i32(b + off + 16);
        if (body_len < 0) goto malformed;
        Py_ssize_t body_start = off + 20;
        Py_ssize_t props_len_pos = body_start + body_len;
        if (props_len_pos + 2 > end) goto malformed;
        int16_t props_len = be_i16(b + props_len_pos);
        if (props_len < 0) goto malformed;
        Py_ssize_t entry_end = props_len_pos + 2 + props_len;
        if (entry_end > end || (Py_ssize_t)total != entry_end - off) goto malformed;
        if (count == cap) {
            cap *= 2;
            Entry *grown = PyMem_Realloc(entries, sizeof(Entry) * (size_t)cap);
            if (!grown) {
                PyMem_Free(entries);
                PyErr_NoMemory();
                return -1;
            }
            entries = grown;
        }
        entries[count].body_start = body_start;
        entries[count].body_len = body_len;
        entries[count].props_start = props_len_pos + 2;
        entries[count].props_len = props_len;
        entries[count].flag = flag;
        count++;
        off = entry_end;
    }
    *out = entries;
    return count;
malformed:
    PyMem_Free(entries);
    *out = NULL;
    return 0;
}
#endif
