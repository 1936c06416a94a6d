/* The one device-reset rule (l2p_life.h). */
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
    return l->ctx != 0 && now != 0 && now != l->ctx;
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
