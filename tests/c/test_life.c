/* The one device-reset rule (l2p_life.h): which objects are stale, the message that refuses
 * one, and that asking without a GPU reports nothing stale and leaves no error behind; the
 * handle's pin / unpin / close ordering, its releases counted through the test deleter; the one
 * usability check; a graph's executable released by the same rule (l2p_stream.h); and the
 * replay timer's event pool forgotten after a reset (l2p_replays.h). */
#include <string.h>

#include "l2p_device.h"
#include "l2p_error.h"
#include "l2p_life.h"
#include "l2p_replays.h"
#include "l2p_stream.h"
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

static void test_rule(void)
{
    l2p_life made = {0, 41}, unknown = {0, 0};
    CHECK(!l2p_life_stale(&made, 41));    /* the same context */
    CHECK(l2p_life_stale(&made, 42));     /* a reset since */
    CHECK(!l2p_life_stale(&made, 0));     /* now unknown: never stale */
    CHECK(!l2p_life_stale(&unknown, 42)); /* made in an unknown context: never stale */
    CHECK(!l2p_life_stale(&made, L2P_LIFE_UNASKED)); /* not asked: never stale */
    CHECK(l2p_life_check(&made, L2P_LIFE_UNASKED, "src", "x was made", "again") == L2P_OK);
}

static void test_message(void)
{
    l2p_life made = {3, 41};
    CHECK(l2p_life_check(&made, 41, "src", "DeviceBuffer was allocated", "allocate it") ==
          L2P_OK);
    CHECK(l2p_life_check(&made, 42, "src", "DeviceBuffer was allocated", "allocate it") ==
          L2P_ERR_STATE);
    const char *m = l2p_last_error()->message;
    CHECK(strncmp(m, "src: device 3 was reset", strlen("src: device 3 was reset")) == 0);
    CHECK(strstr(m, "after this DeviceBuffer was allocated; allocate it") != NULL);
    l2p_clear_error();
    l2p_life unknown = {3, 0};
    CHECK(l2p_life_check(&unknown, 42, "stream", "Stream was made", "make a new one") ==
          L2P_OK);
}

/* Without a usable device (this machine, or a bad index) nothing can be told: not stale. */
static void test_without_a_device(void)
{
    l2p_life bad = {1 << 20, 41};
    CHECK(!l2p_life_gone(&bad));
    CHECK(l2p_last_error()->status == L2P_OK);
    CHECK(l2p_life_check(&bad, 0, "graph", "graph was captured", "capture it again") == L2P_OK);
    l2p_life l;
    CHECK(l2p_life_begin(&l, 1 << 20) != L2P_OK);
    CHECK(l.device == 1 << 20 && l.ctx == 0);
    l2p_clear_error();
}

/* The releases the handles asked for, in place of l2p_release. */
static int released;
static void *released_obj;
static l2p_release_kind released_kind;

static l2p_status count_release(int device, l2p_release_kind kind, void *obj)
{
    (void)device;
    released++;
    released_obj = obj;
    released_kind = kind;
    return L2P_OK;
}

static int obj_a, obj_b; /* addresses standing for CUDA objects */

/* A handle in a known context: nothing here asks the device (no GPU on the test machine). */
static l2p_handle handle(void *obj, unsigned flags)
{
    l2p_handle h;
    /* A device no machine has: where the handle must ask (the last unpin), nothing can be
     * told stale, with or without a GPU (on device 0 of a GPU machine, context 41 would be
     * reported reset and the release skipped). */
    l2p_handle_init(&h, (l2p_life){1 << 20, 41}, L2P_RELEASE_MEMORY, obj, flags);
    released = 0;
    released_obj = NULL;
    return h;
}

static void test_close_without_pins(void)
{
    l2p_handle h = handle(&obj_a, 0);
    CHECK(l2p_handle_owned(&h));
    CHECK(l2p_handle_close(&h, 0) == L2P_OK);
    CHECK(released == 1 && released_obj == &obj_a && released_kind == L2P_RELEASE_MEMORY);
    CHECK(h.obj == NULL);
    CHECK(l2p_handle_close(&h, 0) == L2P_OK); /* double close: a no-op */
    CHECK(released == 1);
}

static void test_pins_defer_the_release(void)
{
    l2p_handle h = handle(&obj_b, 0);
    l2p_handle_pin(&h);
    l2p_handle_pin(&h);
    CHECK(l2p_handle_close(&h, 0) == L2P_OK); /* pinned: deferred */
    CHECK(released == 0 && h.obj == &obj_b);
    CHECK(l2p_handle_close(&h, 0) == L2P_OK); /* still a no-op */
    CHECK(l2p_handle_unpin(&h) == L2P_OK);
    CHECK(released == 0);
    CHECK(l2p_handle_unpin(&h) == L2P_OK); /* the last pin releases it, once */
    CHECK(released == 1 && released_obj == &obj_b);
    l2p_handle_pin(&h); /* a late user of a released handle frees nothing twice */
    CHECK(l2p_handle_unpin(&h) == L2P_OK);
    CHECK(released == 1);
}

static void test_unpin_of_an_open_handle(void)
{
    l2p_handle h = handle(&obj_a, 0);
    l2p_handle_pin(&h);
    CHECK(l2p_handle_unpin(&h) == L2P_OK); /* not closing: nothing released */
    CHECK(released == 0 && h.obj == &obj_a);
    CHECK(l2p_handle_usable(&h, 41, "buffer", "this DeviceBuffer", "DeviceBuffer was allocated",
                            "again") == L2P_OK);
}

static void test_two_step_close(void)
{
    l2p_handle h = handle(&obj_a, 0);
    CHECK(l2p_handle_shut(&h, 0) == 1); /* due now */
    CHECK(released == 0);
    CHECK(l2p_handle_release(&h, 0) == L2P_OK);
    CHECK(released == 1);
    CHECK(l2p_handle_shut(&h, 0) == 0);
}

static void test_borrowed_never_released(void)
{
    l2p_handle h = handle(&obj_a, L2P_HANDLE_BORROWED);
    CHECK(!l2p_handle_owned(&h));
    CHECK(l2p_handle_close(&h, 0) == L2P_OK);
    CHECK(released == 0);
    h = handle(&obj_a, L2P_HANDLE_BORROWED);
    l2p_handle_pin(&h);
    CHECK(l2p_handle_close(&h, 0) == L2P_OK);
    CHECK(l2p_handle_unpin(&h) == L2P_OK);
    CHECK(released == 0);
}

static void test_stale_never_released(void)
{
    l2p_handle h = handle(&obj_a, 0);
    CHECK(l2p_handle_close(&h, 1) == L2P_OK); /* reset since open */
    CHECK(released == 0 && h.obj == NULL);
    h = handle(&obj_b, 0);
    l2p_handle_pin(&h);
    CHECK(l2p_handle_close(&h, 1) == L2P_OK); /* reset, with a user left */
    CHECK(l2p_handle_unpin(&h) == L2P_OK);
    CHECK(released == 0);
    h = handle(&obj_b, 0);
    l2p_handle_pin(&h);
    CHECK(l2p_handle_close(&h, 0) == L2P_OK);
    CHECK(l2p_handle_release(&h, 1) == L2P_OK); /* found reset when the last user went */
    CHECK(released == 0 && h.obj == NULL);
    /* Asking: without a device nothing can be told stale, so the object is released. */
    l2p_handle_init(&h, (l2p_life){1 << 20, 41}, L2P_RELEASE_GRAPH, &obj_a, 0);
    CHECK(l2p_handle_close(&h, L2P_HANDLE_ASK) == L2P_OK);
    CHECK(released == 1 && released_kind == L2P_RELEASE_GRAPH);
    CHECK(l2p_last_error()->status == L2P_OK);
}

/* The message of a refusal, then the error cleared for the next check. */
static int refused_with(l2p_status st, const char *message)
{
    int ok = st == L2P_ERR_STATE && strcmp(l2p_last_error()->message, message) == 0;
    l2p_clear_error();
    return ok;
}

static int refused_starting(l2p_status st, const char *start)
{
    int ok = st == L2P_ERR_STATE &&
             strncmp(l2p_last_error()->message, start, strlen(start)) == 0;
    l2p_clear_error();
    return ok;
}

#define USABLE(h, now, what) \
    l2p_handle_usable((h), (now), (what), "this Stream", "Stream was made", "make a new one")

static void test_usable_open_and_stale(void)
{
    l2p_handle h = handle(&obj_a, 0); /* made in context 41 */
    CHECK(!l2p_handle_is_closed(&h));
    CHECK(USABLE(&h, 41, "stream") == L2P_OK); /* the same context */
    CHECK(l2p_last_error()->status == L2P_OK);
    /* stale against the given `now`: l2p_life_check's message, naming the argument */
    l2p_status st = USABLE(&h, 42, "s2");
    CHECK(st == L2P_ERR_STATE);
    CHECK(strstr(l2p_last_error()->message, "after this Stream was made; make a new one") != NULL);
    CHECK(refused_starting(st, "s2: device 1048576 was reset"));
    /* not asked: the closed state alone, so a stale handle passes */
    CHECK(USABLE(&h, L2P_LIFE_UNASKED, "stream") == L2P_OK);
    /* asked without a device (this machine, or no such device): nothing can be told stale */
    CHECK(USABLE(&h, 0, "stream") == L2P_OK);
    CHECK(l2p_last_error()->status == L2P_OK);
    CHECK(released == 0); /* a check releases nothing */
}

static void test_usable_closed(void)
{
    l2p_handle h = handle(&obj_a, 0);
    CHECK(l2p_handle_close(&h, 0) == L2P_OK);
    CHECK(l2p_handle_is_closed(&h));
    /* closed: refused whatever `now` says, before any context question */
    CHECK(refused_with(USABLE(&h, 41, "stream"), "stream: this Stream is closed"));
    CHECK(refused_with(USABLE(&h, 42, "dst"), "dst: this Stream is closed"));
    CHECK(refused_with(USABLE(&h, L2P_LIFE_UNASKED, "stream"), "stream: this Stream is closed"));
    /* closing with a pin left: already refused */
    h = handle(&obj_b, 0);
    l2p_handle_pin(&h);
    CHECK(l2p_handle_close(&h, 0) == L2P_OK && released == 0);
    CHECK(refused_with(USABLE(&h, 41, "stream"), "stream: this Stream is closed"));
    CHECK(l2p_handle_unpin(&h) == L2P_OK && released == 1);
    /* never opened */
    l2p_handle never = {{0, 0}, L2P_RELEASE_STREAM, NULL, 0, 0};
    CHECK(l2p_handle_is_closed(&never));
    CHECK(refused_with(USABLE(&never, 0, "stream"), "stream: this Stream is closed"));
    CHECK(!l2p_handle_owned(&never));
    CHECK(l2p_handle_close(&never, L2P_HANDLE_ASK) == L2P_OK);
    l2p_clear_error();
    /* the refusal itself, for objects closed on their own (a view) */
    CHECK(refused_with(l2p_handle_closed_error("src", "the DeviceBuffer this view belongs to"),
                       "src: the DeviceBuffer this view belongs to is closed"));
}

/* A borrowed object (a wrapped stream): usable until closed; its context unknown, so never
 * stale, and nothing is asked. */
static void test_usable_borrowed(void)
{
    l2p_handle h;
    l2p_handle_init(&h, (l2p_life){1 << 20, 0}, L2P_RELEASE_STREAM, &obj_a, L2P_HANDLE_BORROWED);
    released = 0;
    CHECK(!l2p_handle_is_closed(&h));
    CHECK(USABLE(&h, 42, "stream") == L2P_OK);
    CHECK(USABLE(&h, 0, "stream") == L2P_OK);
    CHECK(l2p_handle_close(&h, L2P_HANDLE_ASK) == L2P_OK);
    CHECK(released == 0 && h.obj == NULL); /* let go, not destroyed */
    CHECK(refused_with(USABLE(&h, 0, "stream"), "stream: this Stream is closed"));
    /* a borrowed object in a known context is judged by the rule alike */
    l2p_handle_init(&h, (l2p_life){1 << 20, 41}, L2P_RELEASE_STREAM, &obj_a, L2P_HANDLE_BORROWED);
    CHECK(refused_starting(USABLE(&h, 42, "stream"), "stream: device 1048576 was reset"));
}

/* A graph's executable dropped after a node change (l2p_graph_invalidate) goes by the handle's
 * rule: destroyed while its context lives, forgotten after a reset. Stale needs a device to
 * tell: on a GPU machine the graph is made one context before device 0's current one. */
static void test_graph_invalidate(void)
{
    unsigned long long now = 0;
    int gpu = l2p_device_context_id(0, &now) == L2P_OK && now != 0;
    l2p_clear_error();
    l2p_graph g = {.graph = (cudaGraph_t)&obj_b, .exec = (cudaGraphExec_t)&obj_a,
                   .life = {0, now}};
    released = 0;
    l2p_graph_invalidate(&g); /* alive (or unknown: never stale): destroyed */
    CHECK(released == 1 && released_obj == &obj_a && released_kind == L2P_RELEASE_GRAPH_EXEC);
    CHECK(g.exec == NULL && g.graph == (cudaGraph_t)&obj_b); /* the graph itself stays */
    l2p_graph_invalidate(&g); /* nothing left to drop */
    CHECK(released == 1);
    if (gpu) {
        g.exec = (cudaGraphExec_t)&obj_a;
        g.life.ctx = now + 1; /* made in a context that is not the current one: a reset since */
        l2p_graph_invalidate(&g);
        CHECK(released == 1 && g.exec == NULL); /* forgotten, not destroyed */
        g.exec = (cudaGraphExec_t)&obj_a;
        l2p_graph_destroy(&g); /* the same rule at destroy: neither is released */
        CHECK(released == 1 && g.exec == NULL && g.graph == NULL);
    } else {
        printf("test_life: no device, the stale graph is not tried\n");
    }
    CHECK(l2p_last_error()->status == L2P_OK);
}

/* open without a device: the context is unknown (never stale) and the error says why. */
static void test_open_without_a_device(void)
{
    l2p_handle h;
    CHECK(l2p_handle_open(&h, 1 << 20, L2P_RELEASE_STREAM, &obj_a, 0) != L2P_OK);
    CHECK(h.life.ctx == 0 && h.obj == &obj_a && l2p_handle_owned(&h));
    l2p_clear_error();
}

/* The replay timer's pool (l2p_replays_pool_fate): forgotten once the primary context it was
 * made in has another id (or none: destroyed), whatever context the caller runs in; a replay in
 * another context leaves it alone and goes untimed; a pool in a non-primary context, or made
 * where the id was unknown, is never forgotten; nothing is decided before an event is made. */
static void test_replay_pool_fate(void)
{
    CHECK(l2p_replays_pool_fate(4, 1, 41, 41, 1) == L2P_REPLAYS_USE);
    CHECK(l2p_replays_pool_fate(4, 1, 41, 42, 1) == L2P_REPLAYS_FORGET);
    CHECK(l2p_replays_pool_fate(4, 1, 41, 0, 1) == L2P_REPLAYS_FORGET);  /* destroyed */
    CHECK(l2p_replays_pool_fate(4, 1, 41, 42, 0) == L2P_REPLAYS_FORGET); /* new handle too */
    CHECK(l2p_replays_pool_fate(4, 1, 41, 41, 0) == L2P_REPLAYS_ELSEWHERE);
    CHECK(l2p_replays_pool_fate(4, 0, 41, 0, 0) == L2P_REPLAYS_ELSEWHERE); /* green context */
    CHECK(l2p_replays_pool_fate(4, 0, 41, 0, 1) == L2P_REPLAYS_USE);
    CHECK(l2p_replays_pool_fate(4, 1, 0, 42, 1) == L2P_REPLAYS_USE);       /* id unknown */
    CHECK(l2p_replays_pool_fate(0, 1, 41, 42, 0) == L2P_REPLAYS_USE);      /* none made yet */
}

/* Slot ids carry the pool's generation: one id per (generation, index), every id within what
 * replay_end accepts, and the generation wraps rather than overflowing. */
static void test_replay_slot_ids(void)
{
    const int last = L2P_REPLAYS_SLOTS - 1;
    CHECK(l2p_replays_slot_id(0, 5) == 5);
    CHECK(l2p_replays_slot_id(1, 5) != l2p_replays_slot_id(0, 5));
    CHECK(l2p_replays_slot_id(1, 5) % L2P_REPLAYS_SLOTS == 5);
    CHECK(l2p_replays_slot_id(0, last) < l2p_replays_slot_id(1, 0));
    int top = l2p_replays_slot_id(L2P_REPLAYS_GENERATIONS - 1, last);
    CHECK(top == L2P_REPLAYS_GENERATIONS * L2P_REPLAYS_SLOTS - 1 && top > 0);
    CHECK(l2p_replays_slot_id(L2P_REPLAYS_GENERATIONS, 5) == 5);
}

/* A replay on the legacy stream: without a GPU it goes untimed and counted failed; with one
 * it is timed and harvested, and an end with the pair's own index under another generation is
 * ignored (the pair stays pending until its own end). Nothing stays pending. */
static void test_replays_counted(void)
{
    unsigned long long now = 0;
    int gpu = l2p_device_context_id(0, &now) == L2P_OK && now != 0;
    l2p_clear_error();
    int label = l2p_replays_label("test_life"), slot = 7;
    CHECK(label >= 0);
    l2p_replays_counts before, mid, after;
    l2p_replays_counts_get(&before);
    CHECK(l2p_replays_begin((cudaStream_t)0, label, &slot) == L2P_OK && (slot >= 0) == gpu);
    if (gpu) {
        int index = slot % L2P_REPLAYS_SLOTS, gen = slot / L2P_REPLAYS_SLOTS;
        l2p_replays_end(l2p_replays_slot_id((unsigned)gen + 1, index), (cudaStream_t)0);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        size_t none = 9;
        l2p_replays_harvest(&none);
        l2p_replays_counts_get(&mid);
        CHECK(none == 0 && mid.pending == before.pending + 1); /* still begun, not ended */
    }
    l2p_replays_end(slot, (cudaStream_t)0);
    if (gpu) CHECK(cudaDeviceSynchronize() == cudaSuccess);
    size_t added = 9;
    l2p_replays_harvest(&added);
    l2p_replays_counts_get(&after);
    CHECK(added == (size_t)gpu && after.pending == 0);
    if (gpu)
        CHECK(after.timed + after.host == before.timed + before.host + 1 &&
              after.failed == before.failed);
    else
        CHECK(after.failed + after.skipped == before.failed + before.skipped + 1 &&
              after.timed == 0);
}

int main(void)
{
    l2p_handle_set_deleter(count_release);
    test_close_without_pins();
    test_pins_defer_the_release();
    test_unpin_of_an_open_handle();
    test_two_step_close();
    test_borrowed_never_released();
    test_stale_never_released();
    test_usable_open_and_stale();
    test_usable_closed();
    test_usable_borrowed();
    test_graph_invalidate();
    test_open_without_a_device();
    l2p_handle_set_deleter(NULL);
    test_rule();
    test_message();
    test_without_a_device();
    test_replay_pool_fate();
    test_replay_slot_ids();
    test_replays_counted();
    printf("test_life: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed ? 1 : 0;
}
