/* The lifetime of a CUDA object l2persist made or wrapped: the device it lives on and the
 * context it was made in; and the handle that owns such an object until its release.
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
#include "l2p_release.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int device;
    unsigned long long ctx; /* the context id when made; 0: unknown (never reported stale) */
} l2p_life;

/* Record `device` and its current context (entering the device). On failure l->ctx is 0. */
l2p_status l2p_life_begin(l2p_life *l, int device);

/* A `now` that asks nothing and is never stale: for checks of the closed state alone, where
 * the context is checked elsewhere (a launch asks once for all its objects) or a query on every
 * call would cost too much (argument conversions). The driver counts context ids up from small
 * values: none is ever all ones. */
#define L2P_LIFE_UNASKED (~0ull)

/* The rule: made in a context other than `now`, both known. Pure (no CUDA call). */
int l2p_life_stale(const l2p_life *l, unsigned long long now);

/* 1 when the device was reset since the object was made; 0 when it was not or that cannot be
 * told (no error is left behind). Enters the device to ask. */
int l2p_life_gone(const l2p_life *l);

/* L2P_OK, or L2P_ERR_STATE when stale against `now` (0: ask the device; L2P_LIFE_UNASKED:
 * never stale): "what: device N was reset (...) after this <made>; <remedy>". `what` names the
 * argument. */
l2p_status l2p_life_check(const l2p_life *l, unsigned long long now, const char *what,
                          const char *made, const char *remedy);

/* ---- The handle: one owned (or borrowed) CUDA object and its lifetime ----
 *
 * The rule, for every object l2persist releases (buffer memory, streams, graphs and their
 * executables, textures):
 *   - open records the device and the context the object belongs to (l2p_life_begin);
 *   - pins (refs) are users that must see the object alive: a DLPack export, a copy running
 *     without the GIL, a CUDA-array-interface export (held until the last reference goes);
 *   - close marks the handle closing, once (a second close is a no-op); the object is released
 *     when no pin is left: at close, or at the last unpin; exactly once;
 *   - a borrowed object belongs to someone else and is never released;
 *   - an object whose context was reset since open is never released nor used (l2p_life_gone);
 *   - the release is l2p_release's, capture-safe (l2p_release.h): no second release path.
 * Not locked: the caller serialises (the GIL for Python objects); once l2p_handle_shut says
 * a release is due, no pin is left, so l2p_handle_release may run without that lock. */
enum {
    L2P_HANDLE_OPENED = 1u,   /* open was called: the object is ours to manage */
    L2P_HANDLE_CLOSING = 2u,  /* close was called: released when the last pin goes */
    L2P_HANDLE_BORROWED = 4u, /* another library owns it: never released by us */
};

typedef struct {
    l2p_life life;
    l2p_release_kind kind;
    void *obj;      /* the object; NULL once released, or forgotten after a reset */
    int refs;       /* pins */
    unsigned flags; /* L2P_HANDLE_* */
} l2p_handle;

/* Open over an object whose lifetime is already known (no CUDA call). `flags`:
 * 0 or L2P_HANDLE_BORROWED. */
void l2p_handle_init(l2p_handle *h, l2p_life life, l2p_release_kind kind, void *obj,
                     unsigned flags);
/* Take charge of `obj`, made on `device` in its current context (l2p_life_begin; on failure
 * the context is unknown, so never reported stale, and the error is returned). */
l2p_status l2p_handle_open(l2p_handle *h, int device, l2p_release_kind kind, void *obj,
                           unsigned flags);
/* Whether open was called and the object is not borrowed: ours to release. */
int l2p_handle_owned(const l2p_handle *h);

/* `gone` arguments: the caller's answer of l2p_life_gone when it just asked (1 reset, 0 not;
 * it saves a second context query), or L2P_HANDLE_ASK to let the handle ask when it must. */
#define L2P_HANDLE_ASK (-1)

void l2p_handle_pin(l2p_handle *h);
/* Drop a pin; the last one of a closing handle releases the object (its status returned). */
l2p_status l2p_handle_unpin(l2p_handle *h);
/* Close in two steps, for callers that release without their lock (the GIL: a cudaFree waits
 * for the device): l2p_handle_shut marks closing (0 when it already was) and, `gone` being 1,
 * forgets the object; it returns 1 when the release is due now (no pins). Then
 * l2p_handle_release releases it (a no-op for none, borrowed or reset). */
int l2p_handle_shut(l2p_handle *h, int gone);
l2p_status l2p_handle_release(l2p_handle *h, int gone);
/* Both steps. */
l2p_status l2p_handle_close(l2p_handle *h, int gone);

/* Whether the holder may no longer use the object: never opened, or close was called. */
int l2p_handle_is_closed(const l2p_handle *h);

/* The one refusal of a closed object: L2P_ERR_STATE, "what: <subject> is closed" (subject: "this
 * Stream"). For objects whose closed state is their own besides a handle's (a view: closed
 * while the memory it shows lives on). */
l2p_status l2p_handle_closed_error(const char *what, const char *subject);

/* The one check before a use: L2P_OK when open, not closing and not stale against `now` (as
 * l2p_life_check: 0 asks the device, L2P_LIFE_UNASKED checks the closed state alone); else
 * L2P_ERR_STATE with l2p_handle_closed_error's or l2p_life_check's message. A borrowed handle
 * is checked alike (its context is usually unknown: 0, never stale). */
l2p_status l2p_handle_usable(const l2p_handle *h, unsigned long long now, const char *what,
                             const char *subject, const char *made, const char *remedy);

/* For the C tests only: the deleter used instead of l2p_release (NULL restores it), so that
 * releases can be counted without a GPU. */
typedef l2p_status (*l2p_handle_deleter)(int device, l2p_release_kind kind, void *obj);
void l2p_handle_set_deleter(l2p_handle_deleter fn);

#ifdef __cplusplus
}
#endif
#endif
