/* Loads and stores of 1/2/4/8/16 bytes with a chosen cache operator, as templates so that
 * each kernel instance compiles to exactly one instruction form (check with cuobjdump). */
#ifndef L2P_ACCESS_CUH
#define L2P_ACCESS_CUH

#include <cstdint>

#include "l2p_flavour.h"

/* The element type of each width. */
template <int W> struct l2p_word;
template <> struct l2p_word<1> { typedef unsigned char type; };
template <> struct l2p_word<2> { typedef unsigned short type; };
template <> struct l2p_word<4> { typedef unsigned int type; };
template <> struct l2p_word<8> { typedef uint2 type; };
template <> struct l2p_word<16> { typedef uint4 type; };

/* Combining loaded words (so that loads are not dead code). */
__device__ __forceinline__ unsigned char l2p_mix(unsigned char a, unsigned char b) { return a + b; }
__device__ __forceinline__ unsigned short l2p_mix(unsigned short a, unsigned short b) { return a + b; }
__device__ __forceinline__ unsigned int l2p_mix(unsigned int a, unsigned int b) { return a + b; }
__device__ __forceinline__ uint2 l2p_mix(uint2 a, uint2 b) { return make_uint2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ uint4 l2p_mix(uint4 a, uint4 b)
{
    return make_uint4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ __forceinline__ unsigned int l2p_fold(unsigned char a) { return a; }
__device__ __forceinline__ unsigned int l2p_fold(unsigned short a) { return a; }
__device__ __forceinline__ unsigned int l2p_fold(unsigned int a) { return a; }
__device__ __forceinline__ unsigned int l2p_fold(uint2 a) { return a.x ^ a.y; }
__device__ __forceinline__ unsigned int l2p_fold(uint4 a) { return a.x ^ a.y ^ a.z ^ a.w; }

/* An L2 eviction-priority policy register (createpolicy, sm_80+). */
template <int F> __device__ __forceinline__ uint64_t l2p_policy()
{
    uint64_t p;
    if (F == L2P_LD_EVICT_FIRST)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    else if (F == L2P_LD_EVICT_LAST)
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    else
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
    return p;
}

/* ld.global.L2::cache_hint, one form per width. */
__device__ __forceinline__ unsigned char l2p_ld_hint(const unsigned char *p, uint64_t pol)
{
    unsigned short v;
    asm volatile("ld.global.L2::cache_hint.u8 %0, [%1], %2;" : "=h"(v) : "l"(p), "l"(pol));
    return (unsigned char)v;
}
__device__ __forceinline__ unsigned short l2p_ld_hint(const unsigned short *p, uint64_t pol)
{
    unsigned short v;
    asm volatile("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v) : "l"(p), "l"(pol));
    return v;
}
__device__ __forceinline__ unsigned int l2p_ld_hint(const unsigned int *p, uint64_t pol)
{
    unsigned int v;
    asm volatile("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(pol));
    return v;
}
__device__ __forceinline__ uint2 l2p_ld_hint(const uint2 *p, uint64_t pol)
{
    uint2 v;
    asm volatile("ld.global.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
                 : "=r"(v.x), "=r"(v.y) : "l"(p), "l"(pol));
    return v;
}
__device__ __forceinline__ uint4 l2p_ld_hint(const uint4 *p, uint64_t pol)
{
    uint4 v;
    asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
    return v;
}

/* One load of flavour F. `pol` is only read by the eviction-hint flavours. */
template <int F, typename T> __device__ __forceinline__ T l2p_load(const T *p, uint64_t pol)
{
    if (F == L2P_LD_CA) return __ldca(p);
    if (F == L2P_LD_CG) return __ldcg(p);
    if (F == L2P_LD_CS) return __ldcs(p);
    if (F == L2P_LD_LU) return __ldlu(p);
    if (F == L2P_LD_CV) return __ldcv(p);
    if (F == L2P_LD_NC) return __ldg(p);
    if (F >= L2P_LD_EVICT_FIRST) return l2p_ld_hint(p, pol);
    return *p; /* default: a plain ld.global */
}

template <int F> __device__ __forceinline__ uint64_t l2p_load_policy()
{
    return F >= L2P_LD_EVICT_FIRST ? l2p_policy<F>() : 0;
}

template <int S, typename T> __device__ __forceinline__ void l2p_store(T *p, T v)
{
    if (S == L2P_ST_CG) __stcg(p, v);
    else if (S == L2P_ST_CS) __stcs(p, v);
    else if (S == L2P_ST_WT) __stwt(p, v);
    else *p = v; /* wb is st.global's default; __stwb would emit a STRONG.SM store instead */
}

/* Host-side dispatch of a runtime flavour to a template argument. */
#define L2P_DISPATCH_LOAD(f, F, ...)                                             \
    switch (f) {                                                                 \
    case L2P_LD_DEFAULT: { const int F = L2P_LD_DEFAULT; __VA_ARGS__; } break;    \
    case L2P_LD_CA: { const int F = L2P_LD_CA; __VA_ARGS__; } break;              \
    case L2P_LD_CG: { const int F = L2P_LD_CG; __VA_ARGS__; } break;              \
    case L2P_LD_CS: { const int F = L2P_LD_CS; __VA_ARGS__; } break;              \
    case L2P_LD_LU: { const int F = L2P_LD_LU; __VA_ARGS__; } break;              \
    case L2P_LD_CV: { const int F = L2P_LD_CV; __VA_ARGS__; } break;              \
    case L2P_LD_NC: { const int F = L2P_LD_NC; __VA_ARGS__; } break;              \
    case L2P_LD_EVICT_FIRST: { const int F = L2P_LD_EVICT_FIRST; __VA_ARGS__; } break; \
    case L2P_LD_EVICT_LAST: { const int F = L2P_LD_EVICT_LAST; __VA_ARGS__; } break; \
    case L2P_LD_EVICT_NORMAL: { const int F = L2P_LD_EVICT_NORMAL; __VA_ARGS__; } break; \
    default: return cudaErrorInvalidValue;                                       \
    }

#define L2P_DISPATCH_STORE(s, S, ...)                                 \
    switch (s) {                                                      \
    case L2P_ST_WB: { const int S = L2P_ST_WB; __VA_ARGS__; } break;  \
    case L2P_ST_CG: { const int S = L2P_ST_CG; __VA_ARGS__; } break;  \
    case L2P_ST_CS: { const int S = L2P_ST_CS; __VA_ARGS__; } break;  \
    case L2P_ST_WT: { const int S = L2P_ST_WT; __VA_ARGS__; } break;  \
    default: return cudaErrorInvalidValue;                            \
    }

#define L2P_DISPATCH_WIDTH(w, W, ...)                          \
    switch (w) {                                               \
    case 1: { const int W = 1; __VA_ARGS__; } break;           \
    case 2: { const int W = 2; __VA_ARGS__; } break;           \
    case 4: { const int W = 4; __VA_ARGS__; } break;           \
    case 8: { const int W = 8; __VA_ARGS__; } break;           \
    case 16: { const int W = 16; __VA_ARGS__; } break;         \
    default: return cudaErrorInvalidValue;                     \
    }

#endif
