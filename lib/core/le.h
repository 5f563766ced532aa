/* Little-endian byte codec: the one encoding of every number libpcnn puts
 * in a file or a byte string (checkpoints, the scheduler's state, messages
 * between ranks).  Values are assembled byte by byte, so the bytes are the
 * same on every host whatever its byte order, and no struct is dumped raw.
 * Floats travel as their IEEE-754 bit patterns (NaN payloads and signed
 * zeros kept); signed integers as two's complement.  p must hold the
 * value's width in bytes; no alignment is needed. */
#ifndef PCNN_CORE_LE_H
#define PCNN_CORE_LE_H

#include <stdint.h>
#include <string.h>

static inline void le_put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static inline uint16_t le_get_u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static inline void le_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t le_get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static inline void le_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t le_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Signed values: the unsigned conversion is exact (modulo 2^n); the way
 * back avoids C's implementation-defined out-of-range conversion. */
static inline void le_put_i32(unsigned char *p, int32_t v) { le_put_u32(p, (uint32_t)v); }

static inline int32_t le_get_i32(const unsigned char *p)
{
    const uint32_t u = le_get_u32(p);
    return u <= INT32_MAX ? (int32_t)u : (int32_t)(u - INT32_MAX - 1) + INT32_MIN;
}

static inline void le_put_i64(unsigned char *p, int64_t v) { le_put_u64(p, (uint64_t)v); }

static inline int64_t le_get_i64(const unsigned char *p)
{
    const uint64_t u = le_get_u64(p);
    return u <= INT64_MAX ? (int64_t)u : (int64_t)(u - INT64_MAX - 1) + INT64_MIN;
}

static inline void le_put_f32(unsigned char *p, float x)
{
    uint32_t v;
    memcpy(&v, &x, sizeof v);
    le_put_u32(p, v);
}

static inline float le_get_f32(const unsigned char *p)
{
    const uint32_t v = le_get_u32(p);
    float x;
    memcpy(&x, &v, sizeof x);
    return x;
}

static inline void le_put_f64(unsigned char *p, double x)
{
    uint64_t v;
    memcpy(&v, &x, sizeof v);
    le_put_u64(p, v);
}

static inline double le_get_f64(const unsigned char *p)
{
    const uint64_t v = le_get_u64(p);
    double x;
    memcpy(&x, &v, sizeof x);
    return x;
}

#endif
