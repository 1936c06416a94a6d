/* A stand-in libcupti for the C tests of the subscriber and its release (test_cupti_release.c):
 * the callback API's calls that l2p_cupti.c resolves, and fake_cupti_call, which plays a CUDA
 * call's entry or exit on the calling thread as CUPTI would: the subscriber's callback, where
 * the call's domain or id is enabled. Loaded through L2P_CUPTI_LIBRARY, as a real one would be.
 * No GPU and no CUDA driver. */
#include <cupti.h>
#include <stdatomic.h>
#include <string.h>

static CUpti_CallbackFunc _Atomic callback;
static void *userdata;
static atomic_int domain_on[CUPTI_CB_DOMAIN_SIZE];
static atomic_int id_on[CUPTI_DRIVER_TRACE_CBID_SIZE];
static atomic_int finalized, unsubscribed;
/* The test's oracle: entries of the watched id (a capture begin) whose callback has returned,
 * and how many had when cuptiFinalize ended (-1: not finalized). The finalize takes a while
 * (about 0.2 ms of spinning), as a real one does, so that a call meeting it under way is seen. */
static int watched = -1;
static atomic_int watched_returned, finalize_saw = -1;
static atomic_int runtime_on; /* times the runtime domain was turned on: a request's last step
                               * before its client decides */

static void clear(void)
{
    for (int i = 0; i < CUPTI_CB_DOMAIN_SIZE; i++) atomic_store(&domain_on[i], 0);
    for (int i = 0; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++) atomic_store(&id_on[i], 0);
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc fn, void *data)
{
    if (atomic_load(&callback)) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    userdata = data;
    atomic_store(&callback, fn);
    *h = (CUpti_SubscriberHandle)&callback;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h)
{
    if (h != (CUpti_SubscriberHandle)&callback || !atomic_load(&callback))
        return CUPTI_ERROR_INVALID_PARAMETER;
    atomic_store(&callback, NULL);
    clear();
    atomic_fetch_add(&unsubscribed, 1);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle h, CUpti_CallbackDomain d,
                                CUpti_CallbackId id)
{
    if (h != (CUpti_SubscriberHandle)&callback || d != CUPTI_CB_DOMAIN_DRIVER_API ||
        id >= CUPTI_DRIVER_TRACE_CBID_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    atomic_store(&id_on[id], (int)on);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableDomain(uint32_t on, CUpti_SubscriberHandle h, CUpti_CallbackDomain d)
{
    if (h != (CUpti_SubscriberHandle)&callback || d >= CUPTI_CB_DOMAIN_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    atomic_store(&domain_on[d], (int)on);
    if (on && d == CUPTI_CB_DOMAIN_RUNTIME_API) atomic_fetch_add(&runtime_on, 1);
    if (!on && d == CUPTI_CB_DOMAIN_DRIVER_API) /* as CUPTI: the domain's ids go off too */
        for (int i = 0; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++) atomic_store(&id_on[i], 0);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiFinalize(void)
{
    for (volatile long i = 0; i < 200000; i++) {
    }
    atomic_store(&callback, NULL);
    clear();
    atomic_fetch_add(&finalized, 1);
    atomic_store(&finalize_saw, atomic_load(&watched_returned));
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult rc, const char **text)
{
    *text = rc == CUPTI_SUCCESS ? "fake: success" : "fake: error";
    return CUPTI_SUCCESS;
}

/* ---- the test's side ---- */

void fake_cupti_call(int domain, unsigned cbid, int site)
{
    CUpti_CallbackFunc fn = atomic_load(&callback);
    int on = domain >= 0 && domain < CUPTI_CB_DOMAIN_SIZE && atomic_load(&domain_on[domain]);
    if (!on && domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
        on = atomic_load(&id_on[cbid]);
    if (!fn || !on) return;
    CUpti_CallbackData data;
    memset(&data, 0, sizeof data);
    data.callbackSite = (CUpti_ApiCallbackSite)site;
    data.functionName = "fake";
    fn(userdata, (CUpti_CallbackDomain)domain, cbid, &data);
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && (int)cbid == watched && site == CUPTI_API_ENTER)
        atomic_fetch_add(&watched_returned, 1);
}

void fake_cupti_watch(int cbid) { watched = cbid; }
int fake_cupti_runtime_on(void) { return atomic_load(&runtime_on); }
int fake_cupti_finalize_saw(void) { return atomic_load(&finalize_saw); }

int fake_cupti_finalized(void) { return atomic_load(&finalized); }
int fake_cupti_unsubscribed(void) { return atomic_load(&unsubscribed); }
int fake_cupti_subscribed(void) { return atomic_load(&callback) != NULL; }
int fake_cupti_domain_on(int d) { return atomic_load(&domain_on[d]); }
