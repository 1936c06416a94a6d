/* The one device-reset rule and the handle that applies it (l2p_life.h). */
#include "l2p_life.h"

#include "l2p_device.h"

l2p_status l2p_life_begin(l2p_life *l, int device)
{
    l->device = device;
    l->ctx = 0;
    l2p_status rc = l2p_device_context_id(device, &l->ctx);
    if (rc != L2P_OK) l->ctx = 0;
    return rc;
}

int l2p_life_stale(const l2p_life *l, unsigned long long now)
{
    return l->ctx != 0 && now != 0 && now != L2P_LIFE_UNASKED && now != l->ctx;
}

/* The device's context id now, or 0 when it cannot be told (no error left behind). */
static unsigned long long context_now(int device)
{
    unsigned long long now = 0;
    if (l2p_device_context_id(device, &now) != L2P_OK) {
        l2p_clear_error();
        return 0;
    }
    return now;
}

int l2p_life_gone(const l2p_life *l)
{
    return l->ctx != 0 && l2p_life_stale(l, context_now(l->device));
}

l2p_status l2p_life_check(const l2p_life *l, unsigned long long now, const char *what,
                          const char *made, const char *remedy)
{
    if (!l->ctx) return L2P_OK;
    if (!now) now = context_now(l->device);
    if (!l2p_life_stale(l, now)) return L2P_OK;
    return l2p_fail(L2P_ERR_STATE, "%s: device %d was reset (cudaDeviceReset, by l2persist's user "
                    "or another library) after this %s; %s", what, l->device, made, remedy);
}

/* ---- the handle ---- */

static l2p_handle_deleter deleter = l2p_release; /* the tests' hook replaces it */

void l2p_handle_set_deleter(l2p_handle_deleter fn) { deleter = fn ? fn : l2p_release; }

void l2p_handle_init(l2p_handle *h, l2p_life life, l2p_release_kind kind, void *obj,
                     unsigned flags)
{
    h->life = life;
    h->kind = kind;
    h->obj = obj;
    h->refs = 0;
    h->flags = L2P_HANDLE_OPENED | (flags & L2P_HANDLE_BORROWED);
}

l2p_status l2p_handle_open(l2p_handle *h, int device, l2p_release_kind kind, void *obj,
                           unsigned flags)
{
    l2p_life life;
    l2p_status st = l2p_life_begin(&life, device);
    l2p_handle_init(h, life, kind, obj, flags);
    return st;
}

int l2p_handle_owned(const l2p_handle *h)
{
    return (h->flags & (L2P_HANDLE_OPENED | L2P_HANDLE_BORROWED)) == L2P_HANDLE_OPENED;
}

void l2p_handle_pin(l2p_handle *h) { h->refs++; }

l2p_status l2p_handle_unpin(l2p_handle *h)
{
    if (--h->refs > 0 || !(h->flags & L2P_HANDLE_CLOSING)) return L2P_OK;
    return l2p_handle_release(h, L2P_HANDLE_ASK);
}

int l2p_handle_shut(l2p_handle *h, int gone)
{
    if (h->flags & L2P_HANDLE_CLOSING) return 0; /* a second close: nothing more to do */
    h->flags |= L2P_HANDLE_CLOSING;
    if (gone > 0) h->obj = NULL; /* reset: the handle is someone else's by now */
    return h->refs <= 0 && h->obj;
}

l2p_status l2p_handle_release(l2p_handle *h, int gone)
{
    void *obj = h->obj;
    h->obj = NULL; /* released once, whatever follows */
    if (!obj || (h->flags & L2P_HANDLE_BORROWED)) return L2P_OK;
    if (gone < 0) gone = l2p_life_gone(&h->life); /* asked only when there is one to free */
    if (gone) return L2P_OK;
    return deleter(h->life.device, h->kind, obj);
}

l2p_status l2p_handle_close(l2p_handle *h, int gone)
{
    return l2p_handle_shut(h, gone) ? l2p_handle_release(h, gone) : L2P_OK;
}

int l2p_handle_is_closed(const l2p_handle *h)
{
    return !(h->flags & L2P_HANDLE_OPENED) || (h->flags & L2P_HANDLE_CLOSING);
}

l2p_status l2p_handle_closed_error(const char *what, const char *subject)
{
    return l2p_fail(L2P_ERR_STATE, "%s: %s is closed", what, subject);
}

l2p_status l2p_handle_usable(const l2p_handle *h, unsigned long long now, const char *what,
                             const char *subject, const char *made, const char *remedy)
{
    if (l2p_handle_is_closed(h)) return l2p_handle_closed_error(what, subject);
    return l2p_life_check(&h->life, now, what, made, remedy);
}
