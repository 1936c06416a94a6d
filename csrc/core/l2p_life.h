/* The lifetime of a CUDA object l2persist made or wrapped: the device it lives on and the
 * context it was made in.
 *
 * A device reset (cudaDeviceReset or cuDevicePrimaryCtxReset, by l2persist's user or any
 * library in the process) destroys the device's primary context; the next one has another id
 * (l2p_context_id_current). Objects made before the reset are gone: their handles and
 * addresses must be neither used (a launch over them would crash or poison the new context)
 * nor freed (the addresses may belong to new allocations by now). The rule that tells a stale
 * object, and the message that refuses one, are written here once; buffers, streams, graphs
 * and deferred releases all ask it. */
#ifndef L2P_LIFE_H
#define L2P_LIFE_H

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int device;
    unsigned long long ctx; /* the context id when made; 0: unknown (never reported stale) */
} l2p_life;

/* Record `device` and its current context (entering the device). On failure l->ctx is 0. */
l2p_status l2p_life_begin(l2p_life *l, int device);

/* The rule: made in a context other than `now`, both known. Pure (no CUDA call). */
int l2p_life_stale(const l2p_life *l, unsigned long long now);

/* 1 when the device was reset since the object was made; 0 when it was not or that cannot be
 * told (no error is left behind). Enters the device to ask. */
int l2p_life_gone(const l2p_life *l);

/* L2P_OK, or L2P_ERR_STATE when stale against `now` (0: ask the device): "what: device N was
 * reset (...) after this <made>; <remedy>". `what` names the argument. */
l2p_status l2p_life_check(const l2p_life *l, unsigned long long now, const char *what,
                          const char *made, const char *remedy);

#ifdef __cplusplus
}
#endif
#endif
