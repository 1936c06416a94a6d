/* A DeviceBuffer's lifetime: open / closed, the context its memory belongs to, the users
 * that pin it (DLPack exports, copies without the GIL, a CAI export), the streams that used
 * it, and the release that waits for them. The memory is an l2p_handle (l2p_life.h): its rule
 * decides when the memory goes. */
#include "l2p_py.h"

#include "dlpack.h"
#include "l2p_release.h"

/* Bytes of a C-contiguous array; -1 with ValueError for a negative dimension or a size that
 * overflows (every import and allocation goes through here, so nbytes always matches the
 * shape that is exported again). */
static int shape_bytes(int ndim, const Py_ssize_t *shape, size_t itemsize, size_t *out)
{
    size_t n = itemsize;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "shape: dimension %d is %zd; sizes must be >= 0", i,
                         shape[i]);
            return -1;
        }
        if (shape[i] != 0 && n > (size_t)PY_SSIZE_T_MAX / (size_t)shape[i]) {
            PyErr_Format(PyExc_ValueError, "shape: the size overflows (dimension %d is %zd); at "
                         "most %zd bytes", i, shape[i], PY_SSIZE_T_MAX);
            return -1;
        }
        n *= (size_t)shape[i];
    }
    *out = n;
    return 0;
}

/* The buffer a view hangs from, or NULL (an owner, or a foreign wrapper: its base is another
 * library's object). */
static l2p_BufferObject *parent_of(l2p_BufferObject *b)
{
    return b->base && Py_TYPE(b->base) == Py_TYPE(b) ? (l2p_BufferObject *)b->base : NULL;
}

const l2p_life *l2p_buffer_life(l2p_BufferObject *b) { return &l2p_buffer_owner(b)->mem.life; }

int l2p_buffer_usable(l2p_BufferObject *b, unsigned long long now, const char *name)
{
    l2p_status st = L2P_OK;
    /* A view has its own closed state and is usable only while every buffer it hangs from is
     * open (closed set first: a close in progress in another thread already refuses). */
    for (l2p_BufferObject *p = b; p && st == L2P_OK; p = parent_of(p))
        if (p->closed)
            st = l2p_handle_closed_error(name, p == b ? "this DeviceBuffer" : "the DeviceBuffer "
                                         "this view belongs to");
    /* Then the memory's handle, by its rule: the reset check, against the owner's context. */
    if (st == L2P_OK)
        st = l2p_handle_usable(&l2p_buffer_owner(b)->mem, now, name, "this DeviceBuffer",
                               "DeviceBuffer was allocated", "its memory is gone and its "
                               "addresses may belong to new allocations. Allocate it again");
    return st == L2P_OK ? 0 : l2p_py_raise_int(l2p_state_from_type(Py_TYPE(b)));
}

int l2p_buffer_check_open(l2p_BufferObject *b)
{
    return l2p_buffer_usable(b, L2P_LIFE_UNASKED, "buffer");
}

int l2p_buffer_check_alive(l2p_BufferObject *b) { return l2p_buffer_usable(b, 0, "buffer"); }

/* Whether our memory still belongs to the device's current context (not after a reset). */
static int memory_is_ours(l2p_BufferObject *b) { return !l2p_life_gone(l2p_buffer_life(b)); }

int l2p_buffer_note_use(l2p_BufferObject *b, PyObject *stream)
{
    l2p_StreamObject *s = (l2p_StreamObject *)stream;
    if (!stream) return 0;
    /* The view and every buffer it hangs from: an export or close of the parent must see
     * work launched through the view. */
    for (l2p_BufferObject *p = b; p; p = parent_of(p)) Py_XSETREF(p->stream, Py_NewRef(stream));
    /* Captured work keeps its buffers alive as long as the Graph lives. */
    if (s->capture_refs && PyList_Append(s->capture_refs, (PyObject *)b) < 0) return -1;
    return 0;
}

l2p_BufferObject *l2p_buffer_alloc(l2p_state *st, int ndim, const Py_ssize_t *shape,
                                   PyArray_Descr *dtype, int device)
{
    size_t nbytes;
    if (shape_bytes(ndim, shape, (size_t)PyDataType_ELSIZE(dtype), &nbytes) < 0) return NULL;
    l2p_BufferObject *b = PyObject_GC_New(l2p_BufferObject, st->DeviceBuffer);
    if (!b) return NULL;
    b->ptr = NULL;
    b->ndim = ndim;
    for (int i = 0; i < ndim; i++) b->shape[i] = shape[i];
    b->dtype = (PyArray_Descr *)Py_NewRef((PyObject *)dtype);
    b->nbytes = nbytes;
    b->device = device;
    b->closed = 0;
    /* Owns nothing until an allocation opens it (views and foreign wrappers never do); the
     * device is known, the context not (0: never reported stale). obj stays NULL: pins on a
     * wrapper never hold its release back. */
    l2p_handle_init(&b->mem, (l2p_life){device, 0}, L2P_RELEASE_MEMORY, NULL,
                    L2P_HANDLE_BORROWED);
    b->cai_pinned = 0;
    b->base = NULL;
    b->dl_managed = NULL;
    b->stream = NULL;
    b->texture = 0;
    b->weakreflist = NULL;
    PyObject_GC_Track(b);
    return b;
}

/* Pins go to the buffer that owns the memory: a view hangs off its owner. */
void l2p_buffer_pin(l2p_BufferObject *b) { l2p_handle_pin(&l2p_buffer_owner(b)->mem); }

void l2p_buffer_unpin(l2p_BufferObject *b)
{
    /* the last user of a closed buffer frees it; nobody to report an error to */
    if (l2p_handle_unpin(&l2p_buffer_owner(b)->mem) != L2P_OK) l2p_clear_error();
}

void l2p_buffer_pin_cai(l2p_BufferObject *b)
{
    l2p_BufferObject *root = l2p_buffer_owner(b);
    if (root->cai_pinned) return; /* one pin, let go by tp_dealloc */
    root->cai_pinned = 1;
    l2p_handle_pin(&root->mem);
}

/* The buffer that owns the memory a view or wrapper reaches (itself when it owns it). */
l2p_BufferObject *l2p_buffer_owner(l2p_BufferObject *b)
{
    while (!l2p_handle_owned(&b->mem) && parent_of(b)) b = parent_of(b);
    return b;
}

/* Wait for the work l2persist last queued on this buffer (on one of our Streams). */
static void wait_for_use(l2p_BufferObject *b)
{
    l2p_StreamObject *s = (l2p_StreamObject *)b->stream;
    if (!s || l2p_py_stream_closed(s)) return;
    cudaStream_t h = l2p_py_stream_handle(s);
    int device = l2p_py_stream_device(s);
    Py_BEGIN_ALLOW_THREADS
    (void)l2p_stream_synchronize(device, h);
    Py_END_ALLOW_THREADS
}

/* Memory another library lent us is handed back once our work on it is done: when this
 * wrapper holds the producer's last reference or a consumed DLPack tensor. */
static int lends_last_reference(l2p_BufferObject *b)
{
    if (l2p_handle_owned(&b->mem)) return 0;
    if (b->dl_managed) return 1;
    return b->base && Py_TYPE(b->base) != Py_TYPE(b) && Py_REFCNT(b->base) == 1;
}

/* The cached texture object, as a handle over the memory's lifetime (never after a reset). */
static void close_texture(l2p_BufferObject *b, int gone)
{
    l2p_handle tex;
    l2p_handle_init(&tex, *l2p_buffer_life(b), L2P_RELEASE_TEXTURE, (void *)(size_t)b->texture,
                    0);
    if (l2p_handle_close(&tex, gone) != L2P_OK) l2p_clear_error(); /* nothing left to do */
    b->texture = 0;
}

static l2p_status buffer_release_relaxed(l2p_BufferObject *b)
{
    l2p_status st = L2P_OK;
    if (b->closed) return L2P_OK;
    b->closed = 1;
    /* After a device reset the memory, the texture object and the stream are gone, and their
     * addresses and handles may be someone else's by now: touch none of them. */
    int gone = !memory_is_ours(b);
    /* A kernel may still read the texture or the borrowed memory: wait for it first. */
    if (!gone && (b->texture || lends_last_reference(b))) wait_for_use(b);
    close_texture(b, gone); /* before the memory it reads goes */
    int due = l2p_handle_shut(&b->mem, gone); /* views and wrappers: never due */
    if (!due && b->mem.obj) {
        /* Pinned: a consumer (PyTorch, CuPy, JAX) still holds a DLPack view of this memory, or
         * another thread is copying it, or a CUDA-array-interface consumer may hold us: freeing
         * it now would let the next allocation show through. The buffer is closed for us; the
         * last DLPack user (l2p_buffer_unpin) or, after a CAI export, the last reference
         * (buf_dealloc) frees the memory. */
        Py_CLEAR(b->stream);
        return L2P_OK;
    }
    if (due) { /* ours, unpinned, not reset (shut forgets the memory after a reset) */
        Py_BEGIN_ALLOW_THREADS /* cudaFree waits for the device: let other threads run */
        st = l2p_handle_release(&b->mem, 0); /* just asked: not gone */
        Py_END_ALLOW_THREADS
    }
    if (b->dl_managed) {
        l2p_DLManagedTensor *t = (l2p_DLManagedTensor *)b->dl_managed;
        b->dl_managed = NULL;
        if (t->deleter) t->deleter(t);
    }
    b->ptr = NULL;
    Py_CLEAR(b->base);
    Py_CLEAR(b->stream);
    return st;
}

/* No capture on any stream may be broken by a buffer going: its context checks, the wait for
 * our own stream and the frees run with the thread's capture mode relaxed (l2p_release.h). */
l2p_status l2p_buffer_release(l2p_BufferObject *b)
{
    int mode = l2p_capture_relax();
    l2p_status st = buffer_release_relaxed(b);
    l2p_capture_restore(mode);
    return st;
}
