/* Helpers shared by the compiled record modules (big-endian access, Java hashes). */
#ifndef TIDEMQ_NATIVE_COMMON_H
#define TIDEMQ_NATIVE_COMMON_H
#include <stdint.h>
#include <string.h>

static inline int32_t be_i32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}
static inline int16_t be_i16(const unsigned char *p) {
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}
static inline int64_t be_i64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be_i32(p) << 32) | (uint64_t)(uint32_t)be_i32(p + 4));
}
static inline void put_i32(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24); p[1] = (unsigned char)(u >> 16);
    p[2] = (unsigned char)(u >> 8); p[3] = (unsigned char)u;
}
static inline void put_i16(unsigned char *p, int16_t v) {
    uint16_t u = (uint16_t)v;
    p[0] = (unsigned char)(u >> 8); p[1] = (unsigned char)u;
}
static inline void put_i64(unsigned char *p, int64_t v) {
    put_i32(p, (int32_t)((uint64_t)v >> 32));
    put_i32(p + 4, (int32_t)(uint64_t)v);
}
#endif
