/* capture-interpose: an LD_PRELOAD library that sees every stream capture's begin and end at the
 * CUDA driver's entry points, with no CUPTI (issue 50, a study).
 *
 * Why: the watcher tracks captures through CUPTI's driver callbacks (csrc/core/l2p_capture.h),
 * and a CUPTI subscriber attached to a process costs decode_big about 0.5 % of its loop by
 * itself (docs/results/live.md, f7a980d): the floor under every search. Nor can CUPTI be let go
 * once graphs were made under it (161093c). Capture tracking without CUPTI is the first piece of
 * a search that never attaches it. This library asks whether it can be done completely and
 * cheaply: does every capture the zoo's libraries make pass here, and what does it cost.
 *
 * How a driver call reaches a library, and where this sits:
 *   - cudart (PyTorch's, CuPy's, a static one) dlopens libcuda.so.1, takes cuGetProcAddress_v2
 *     with dlsym, then takes every driver function through it. Triton and XLA dlsym the driver's
 *     functions themselves. So dlsym is interposed: a cu* name it resolves to a capture call or
 *     to cuGetProcAddress comes back wrapped, and a wrapped cuGetProcAddress wraps what it hands
 *     out in turn (cuGetProcAddress asked for itself included).
 *   - A library linked against libcuda calls the exports directly: the same names are exported
 *     here, before libcuda in the lookup order, and forward to libcuda's.
 * Every other dlsym is a tail call into glibc's, so glibc still sees its caller's return address
 * (RTLD_NEXT is resolved relative to the caller; a call through a frame of ours would resolve it
 * relative to this library).
 *
 * A wrapper must call the very function the driver handed out (its version, its per-thread
 * default stream flavour), so each is a slot: a real pointer and the signature it has, and a
 * wrapper per slot and signature, made by a macro. The counting follows the core's rules: a
 * begin counts open at entry and closed again where it failed; an end closes a capture where it
 * returned success or CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (the core's rule where a stream's
 * state cannot be read).
 *
 * Reported at exit on stderr where L2P_INTERPOSE_REPORT=1 ("interpose: pid ..."; by a process
 * that reached the driver), and readable in the
 * process through l2p_interpose_counts (ctypes). Not the package's code: a study. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef void *CUstream;
typedef void *CUgraph;
typedef unsigned long long cuuint64_t;

#define ERR_CAPTURE_INVALIDATED 901
#define ERR_NOT_INITIALIZED 3
#define NSLOTS 16

enum { K_BEGIN1, K_BEGIN2, K_TOGRAPH, K_END, K_GPA1, K_GPA2, K_NKINDS, K_NONE = -1 };

typedef CUresult (*begin1_t)(CUstream);
typedef CUresult (*begin2_t)(CUstream, int);
typedef CUresult (*tograph_t)(CUstream, CUgraph, const void *, const void *, size_t, int);
typedef CUresult (*end_t)(CUstream, CUgraph *);
typedef CUresult (*gpa1_t)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_t)(const char *, void **, int, cuuint64_t, int *);
typedef void *(*dlsym_t)(void *, const char *);

static struct { int kind; void *_Atomic real; } slots[NSLOTS];
static int nslots;
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;

/* what was seen: [0] begun, [1] failed, [2] ended, [3] open now, [4] unmatched ends,
 * [5] functions wrapped, [6] lookups of a capture name left unwrapped, [7] slots full */
static atomic_long counts[8];

static dlsym_t real_dlsym(void)
{
    static dlsym_t real;
    if (!real) {
        real = (dlsym_t)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!real)
            real = (dlsym_t)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    return real;
}

/* libcuda's own export of `name` (the exports below forward to it); NULL where libcuda is not
 * loaded: a caller linked against it has loaded it. */
static void *libcuda_sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    void *p = h ? real_dlsym()(h, name) : NULL;
    if (h)
        dlclose(h);
    return p;
}

static void *real_of(int i) { return atomic_load(&slots[i].real); }

static void begin_entry(void)
{
    atomic_fetch_add(&counts[0], 1);
    atomic_fetch_add(&counts[3], 1);
}

static void begin_exit(CUresult r)
{
    if (r != 0) {
        atomic_fetch_add(&counts[1], 1);
        atomic_fetch_sub(&counts[3], 1);
    }
}

static void end_exit(CUresult r)
{
    if (r != 0 && r != ERR_CAPTURE_INVALIDATED)
        return;
    atomic_fetch_add(&counts[2], 1);
    if (atomic_fetch_sub(&counts[3], 1) <= 0) {   /* a capture begun before we could see it */
        atomic_fetch_add(&counts[3], 1);
        atomic_fetch_add(&counts[4], 1);
    }
}

static void *wrap(int kind, void *real);
static int in_self(void *p);

static CUresult on_begin1(int i, CUstream s)
{
    begin_entry();
    CUresult r = ((begin1_t)real_of(i))(s);
    begin_exit(r);
    return r;
}

static CUresult on_begin2(int i, CUstream s, int mode)
{
    begin_entry();
    CUresult r = ((begin2_t)real_of(i))(s, mode);
    begin_exit(r);
    return r;
}

static CUresult on_tograph(int i, CUstream s, CUgraph g, const void *deps, const void *data,
                           size_t n, int mode)
{
    begin_entry();
    CUresult r = ((tograph_t)real_of(i))(s, g, deps, data, n, mode);
    begin_exit(r);
    return r;
}

static CUresult on_end(int i, CUstream s, CUgraph *g)
{
    CUresult r = ((end_t)real_of(i))(s, g);
    end_exit(r);
    return r;
}

/* The kind of a function cuGetProcAddress handed out for `sym` (a name without its version
 * suffix, as the driver is asked; a suffixed one is taken as an export's name). */
static int kind_of_export(const char *name);

static int kind_of_proc(const char *sym, int version, void *pfn)
{
    if (strcmp(sym, "cuStreamBeginCapture") == 0)
        return version >= 10010 ? K_BEGIN2 : K_BEGIN1;   /* the mode argument came in 10.1 */
    if (strcmp(sym, "cuStreamBeginCaptureToGraph") == 0)
        return K_TOGRAPH;
    if (strcmp(sym, "cuStreamEndCapture") == 0)
        return K_END;
    if (strcmp(sym, "cuGetProcAddress") == 0) {
        if (in_self(pfn))
            return K_NONE;      /* our own export (a driver that calls its exports by name) */
        /* which ABI came back is read from the pointer: libcuda's two exports */
        if (pfn == libcuda_sym("cuGetProcAddress_v2"))
            return K_GPA2;
        if (pfn == libcuda_sym("cuGetProcAddress"))
            return K_GPA1;
        atomic_fetch_add(&counts[6], 1);
        return K_NONE;
    }
    return kind_of_export(sym);
}

static CUresult on_gpa1(int i, const char *sym, void **pfn, int ver, cuuint64_t flags)
{
    CUresult r = ((gpa1_t)real_of(i))(sym, pfn, ver, flags);
    if (r == 0 && sym && pfn && *pfn)
        *pfn = wrap(kind_of_proc(sym, ver, *pfn), *pfn);
    return r;
}

static CUresult on_gpa2(int i, const char *sym, void **pfn, int ver, cuuint64_t flags, int *st)
{
    CUresult r = ((gpa2_t)real_of(i))(sym, pfn, ver, flags, st);
    if (r == 0 && sym && pfn && *pfn)
        *pfn = wrap(kind_of_proc(sym, ver, *pfn), *pfn);
    return r;
}

#define SLOT(i)                                                                                   \
    static CUresult b1_##i(CUstream s) { return on_begin1(i, s); }                               \
    static CUresult b2_##i(CUstream s, int m) { return on_begin2(i, s, m); }                      \
    static CUresult tg_##i(CUstream s, CUgraph g, const void *d, const void *e, size_t n, int m) \
    { return on_tograph(i, s, g, d, e, n, m); }                                                  \
    static CUresult en_##i(CUstream s, CUgraph *g) { return on_end(i, s, g); }                   \
    static CUresult g1_##i(const char *a, void **p, int v, cuuint64_t f)                         \
    { return on_gpa1(i, a, p, v, f); }                                                            \
    static CUresult g2_##i(const char *a, void **p, int v, cuuint64_t f, int *st)                \
    { return on_gpa2(i, a, p, v, f, st); }
SLOT(0) SLOT(1) SLOT(2) SLOT(3) SLOT(4) SLOT(5) SLOT(6) SLOT(7)
SLOT(8) SLOT(9) SLOT(10) SLOT(11) SLOT(12) SLOT(13) SLOT(14) SLOT(15)
#define ROW(i) {(void *)b1_##i, (void *)b2_##i, (void *)tg_##i, (void *)en_##i, (void *)g1_##i, \
                (void *)g2_##i}
static void *const wrappers[NSLOTS][K_NKINDS] = {
    ROW(0), ROW(1), ROW(2), ROW(3), ROW(4), ROW(5), ROW(6), ROW(7),
    ROW(8), ROW(9), ROW(10), ROW(11), ROW(12), ROW(13), ROW(14), ROW(15)};

/* Whether `p` is this library's own code: an export found by dlsym(RTLD_DEFAULT) comes here. */
static int in_self(void *p)
{
    Dl_info mine, theirs;
    return dladdr((void *)in_self, &mine) && dladdr(p, &theirs)
           && mine.dli_fbase == theirs.dli_fbase;
}

/* The wrapper of `real` as a `kind`: the slot that holds it already, else a new one; `real`
 * itself where it is our own code (asked twice, or an export), of no tracked kind or the slots are
 * full. */
static void *wrap(int kind, void *real)
{
    if (kind == K_NONE || !real)
        return real;
    if (in_self(real))
        return real;                       /* a wrapper or an export of ours: counted there */
    void *out = real;
    pthread_mutex_lock(&slot_lock);
    for (int i = 0; i < nslots; i++) {
        if (slots[i].kind == kind && atomic_load(&slots[i].real) == real) {
            out = wrappers[i][kind];
            goto done;
        }
    }
    if (nslots == NSLOTS) {
        atomic_fetch_add(&counts[7], 1);
        goto done;
    }
    slots[nslots].kind = kind;
    atomic_store(&slots[nslots].real, real);
    out = wrappers[nslots][kind];
    nslots++;
    atomic_fetch_add(&counts[5], 1);
done:
    pthread_mutex_unlock(&slot_lock);
    return out;
}

static int kind_of_export(const char *name)
{
    static const struct { const char *name; int kind; } names[] = {
        {"cuStreamBeginCapture", K_BEGIN1},          {"cuStreamBeginCapture_ptsz", K_BEGIN1},
        {"cuStreamBeginCapture_v2", K_BEGIN2},       {"cuStreamBeginCapture_v2_ptsz", K_BEGIN2},
        {"cuStreamBeginCaptureToGraph", K_TOGRAPH},  {"cuStreamBeginCaptureToGraph_ptsz", K_TOGRAPH},
        {"cuStreamEndCapture", K_END},               {"cuStreamEndCapture_ptsz", K_END},
        {"cuGetProcAddress", K_GPA1},                {"cuGetProcAddress_v2", K_GPA2},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].kind;
    return K_NONE;
}

void *dlsym(void *handle, const char *name)
{
    if (name[0] == 'c' && name[1] == 'u' && (name[2] == 'S' || name[2] == 'G')) {
        void *p = real_dlsym()(handle, name);
        return wrap(kind_of_export(name), p);
    }
    return real_dlsym()(handle, name);   /* a tail call: see the head of this file */
}

/* The exports, for a library linked against libcuda: each forwards through its own slot. */
#define EXPORT(name, kind, params, args, call)                                                    \
    CUresult name params                                                                         \
    {                                                                                             \
        static int slot = -1;                                                                     \
        if (slot < 0) {                                                                           \
            void *w = wrap(kind, libcuda_sym(#name));                                             \
            for (int i = 0; i < nslots && slot < 0; i++)                                          \
                if (wrappers[i][kind] == w)                                                       \
                    slot = i;                                                                     \
            if (slot < 0)                                                                         \
                return ERR_NOT_INITIALIZED;                                                       \
        }                                                                                         \
        return call args;                                                                         \
    }
EXPORT(cuStreamBeginCapture, K_BEGIN1, (CUstream s), (slot, s), on_begin1)
EXPORT(cuStreamBeginCapture_ptsz, K_BEGIN1, (CUstream s), (slot, s), on_begin1)
EXPORT(cuStreamBeginCapture_v2, K_BEGIN2, (CUstream s, int m), (slot, s, m), on_begin2)
EXPORT(cuStreamBeginCapture_v2_ptsz, K_BEGIN2, (CUstream s, int m), (slot, s, m), on_begin2)
EXPORT(cuStreamBeginCaptureToGraph, K_TOGRAPH,
       (CUstream s, CUgraph g, const void *d, const void *e, size_t n, int m),
       (slot, s, g, d, e, n, m), on_tograph)
EXPORT(cuStreamBeginCaptureToGraph_ptsz, K_TOGRAPH,
       (CUstream s, CUgraph g, const void *d, const void *e, size_t n, int m),
       (slot, s, g, d, e, n, m), on_tograph)
EXPORT(cuStreamEndCapture, K_END, (CUstream s, CUgraph *g), (slot, s, g), on_end)
EXPORT(cuStreamEndCapture_ptsz, K_END, (CUstream s, CUgraph *g), (slot, s, g), on_end)
EXPORT(cuGetProcAddress, K_GPA1, (const char *a, void **p, int v, cuuint64_t f),
       (slot, a, p, v, f), on_gpa1)
EXPORT(cuGetProcAddress_v2, K_GPA2, (const char *a, void **p, int v, cuuint64_t f, int *st),
       (slot, a, p, v, f, st), on_gpa2)

/* The counts, for ctypes: out[8] as `counts` above. */
void l2p_interpose_counts(long *out)
{
    for (int i = 0; i < 8; i++)
        out[i] = atomic_load(&counts[i]);
}

__attribute__((destructor)) static void report(void)
{
    const char *e = getenv("L2P_INTERPOSE_REPORT");
    if (!e || strcmp(e, "1") != 0)
        return;
    if (!atomic_load(&counts[0]) && !atomic_load(&counts[5]))
        return;   /* a process that never reached the driver (a helper the program ran) */
    fprintf(stderr, "interpose: pid %ld begun %ld failed %ld ended %ld open %ld unmatched %ld "
            "wrapped %ld unwrapped %ld full %ld\n", (long)getpid(), atomic_load(&counts[0]),
            atomic_load(&counts[1]), atomic_load(&counts[2]), atomic_load(&counts[3]),
            atomic_load(&counts[4]), atomic_load(&counts[5]), atomic_load(&counts[6]),
            atomic_load(&counts[7]));
}
