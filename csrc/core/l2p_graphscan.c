#include "l2p_graphscan.h"

#include <cuda.h> /* driver types only: the entry points come through l2p_driver_symbol */
#include <stdlib.h>
#include <string.h>

#include "l2p_device.h"
#include "l2p_stream.h"

/* ---- pure parts ---- */

int l2p_word_may_be_pointer(uint64_t w)
{
    return w >= (1ull << 16) && w < (1ull << 57);
}

size_t l2p_scan_param_words(const unsigned char *bytes, size_t param_offset, size_t size,
                            unsigned *offsets, uint64_t *words, size_t cap)
{
    size_t found = 0;
    size_t k = (8 - param_offset % 8) % 8; /* first offset aligned in the argument buffer */
    for (; k + 8 <= size; k += 8) {
        uint64_t w;
        memcpy(&w, bytes + k, sizeof w);
        if (!l2p_word_may_be_pointer(w)) continue;
        if (found < cap) {
            offsets[found] = (unsigned)k;
            words[found] = w;
        }
        found++;
    }
    return found;
}

const unsigned char *l2p_extra_buffer(void *const *extra, size_t *size)
{
    const unsigned char *buf = NULL;
    *size = 0;
    for (size_t j = 0; extra && extra[j] != CU_LAUNCH_PARAM_END && j < 64; j += 2) {
        if (extra[j] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = (const unsigned char *)extra[j + 1];
        else if (extra[j] == CU_LAUNCH_PARAM_BUFFER_SIZE) *size = *(const size_t *)extra[j + 1];
        else break; /* an option we do not know: its value's form is unknown too */
    }
    return buf;
}

/* The offer a word belongs to, or -1. */
static long owning_offer(uint64_t w, const l2p_offer *offers, size_t n)
{
    long best = -1;
    for (size_t i = 0; i < n; i++) {
        const l2p_offer *o = &offers[i];
        if (!(o->ptr <= w && w - o->ptr < o->nbytes)) continue;
        if (best < 0) { best = (long)i; continue; }
        const l2p_offer *b = &offers[best];
        int o_starts = o->ptr == w, b_starts = b->ptr == w;
        if (o_starts > b_starts || (o_starts == b_starts && o->nbytes < b->nbytes)) best = (long)i;
    }
    return best;
}

static int record_cmp(const void *a, const void *b)
{
    const l2p_buffer_record *x = (const l2p_buffer_record *)a, *y = (const l2p_buffer_record *)b;
    if (x->address != y->address) return x->address < y->address ? -1 : 1;
    /* at one address an offered tensor before the allocation that holds it */
    unsigned long xo = (unsigned long)x->offer, yo = (unsigned long)y->offer; /* -1 sorts last */
    return xo == yo ? 0 : xo < yo ? -1 : 1;
}

static size_t find_record(const l2p_buffer_record *r, size_t n, uint64_t address, long offer)
{
    for (size_t i = 0; i < n; i++)
        if (r[i].offer == offer && (offer >= 0 || r[i].address == address)) return i;
    return n;
}

l2p_status l2p_buffers_build(const l2p_buffer_use *uses, size_t n_uses, const l2p_offer *offers,
                             size_t n_offers, l2p_buffer_record **out, size_t *n_out,
                             size_t *record_of)
{
    l2p_buffer_record *r = (l2p_buffer_record *)calloc(n_uses ? n_uses : 1, sizeof *r);
    size_t n = 0;
    *out = NULL;
    *n_out = 0;
    if (!r) return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory grouping %zu uses", n_uses);
    for (size_t i = 0; i < n_uses; i++) { /* one record per offer, or per allocation */
        long o = owning_offer(uses[i].word, offers, n_offers);
        uint64_t address = o >= 0 ? offers[o].ptr : uses[i].range_start;
        if (find_record(r, n, address, o) == n) {
            r[n].address = address;
            r[n].size = o >= 0 ? offers[o].nbytes : uses[i].range_size;
            r[n].offer = o;
            n++;
        }
    }
    qsort(r, n, sizeof *r, record_cmp);
    for (size_t i = 0; record_of && i < n_uses; i++) {
        long o = owning_offer(uses[i].word, offers, n_offers);
        record_of[i] = find_record(r, n, o >= 0 ? offers[o].ptr : uses[i].range_start, o);
    }
    *out = r;
    *n_out = n;
    return L2P_OK;
}

/* ---- the driver ---- */

typedef CUresult (*get_params_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*param_info_fn)(CUfunction, size_t, size_t *, size_t *);
typedef CUresult (*func_name_fn)(const char **, CUfunction);
typedef CUresult (*kernel_function_fn)(CUfunction *, CUkernel);
typedef CUresult (*pointer_attr_fn)(void *, CUpointer_attribute, CUdeviceptr);

typedef struct {
    get_params_fn get_params;
    param_info_fn param_info; /* NULL before driver 12.4 */
    func_name_fn func_name;   /* NULL before driver 12.3 */
    kernel_function_fn kernel_function;
    pointer_attr_fn pointer_attr;
} driver_calls;

/* Resolved once; the optional ones may stay NULL (a driver too old for them). */
static l2p_status driver(const driver_calls **out)
{
    static driver_calls d;
    static int resolved;
    if (!resolved) {
        void *f;
        L2P_TRY(l2p_driver_symbol("cuGraphKernelNodeGetParams", &f));
        d.get_params = (get_params_fn)f;
        L2P_TRY(l2p_driver_symbol("cuPointerGetAttribute", &f));
        d.pointer_attr = (pointer_attr_fn)f;
        d.param_info = l2p_driver_symbol_at("cuFuncGetParamInfo", 12040, &f) == L2P_OK ? (param_info_fn)f : NULL;
        d.func_name = l2p_driver_symbol_at("cuFuncGetName", 12030, &f) == L2P_OK ? (func_name_fn)f : NULL;
        d.kernel_function =
            l2p_driver_symbol("cuKernelGetFunction", &f) == L2P_OK ? (kernel_function_fn)f : NULL;
        l2p_clear_error();
        resolved = 1;
    }
    *out = &d;
    return L2P_OK;
}

/* The node's parameters, with func filled from `kern` when the node names a library kernel. */
static l2p_status node_params(const driver_calls *d, cudaGraphNode_t node,
                              CUDA_KERNEL_NODE_PARAMS *p)
{
    memset(p, 0, sizeof *p);
    CUresult rc = d->get_params((CUgraphNode)node, p);
    if (rc != CUDA_SUCCESS)
        return l2p_fail(L2P_ERR_CUDA, "cuGraphKernelNodeGetParams failed (CUresult %d)", (int)rc);
    if (!p->func && p->kern && d->kernel_function &&
        d->kernel_function(&p->func, p->kern) != CUDA_SUCCESS)
        p->func = NULL;
    return L2P_OK;
}

l2p_status l2p_discovery_supported(void)
{
    const driver_calls *d;
    L2P_TRY(driver(&d));
    if (!d->param_info)
        return l2p_fail(L2P_ERR_NOT_SUPPORTED, "discovery needs cuFuncGetParamInfo (a CUDA 12.4 "
                        "or newer driver) to find each kernel parameter's bytes");
    return L2P_OK;
}

static void name_of(const driver_calls *d, void *func, char *out)
{
    const char *name = NULL;
    out[0] = '\0';
    if (func && d->func_name && d->func_name(&name, (CUfunction)func) == CUDA_SUCCESS && name) {
        strncpy(out, name, L2P_KERNEL_NAME_MAX - 1);
        out[L2P_KERNEL_NAME_MAX - 1] = '\0';
    }
}

void l2p_function_name(void *func, char *out)
{
    const driver_calls *d;
    out[0] = '\0';
    if (driver(&d) == L2P_OK) name_of(d, func, out);
}

int l2p_function_param(void *func, size_t i, size_t *offset, size_t *size)
{
    const driver_calls *d;
    if (driver(&d) != L2P_OK) return 0;
    return d->param_info && d->param_info((CUfunction)func, i, offset, size) == CUDA_SUCCESS;
}

void *l2p_kernel_function(void *kernel)
{
    const driver_calls *d;
    CUfunction f = NULL;
    if (driver(&d) != L2P_OK || !d->kernel_function ||
        d->kernel_function(&f, (CUkernel)kernel) != CUDA_SUCCESS)
        return NULL;
    return (void *)f;
}

/* Room for `need` elements of `size` bytes in *buf (l2p_grow). */
static l2p_status room(void **buf, size_t *cap, size_t need, size_t size)
{
    if (l2p_grow(buf, cap, need, size, 64)) return L2P_OK;
    return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory describing kernel nodes");
}

typedef struct {
    size_t spans, spans_cap, args, args_cap; /* used and allocated, in elements */
} described_sizes;

/* Node i's parameter spans (cuFuncGetParamInfo), appended; returns the end of the last. */
static l2p_status take_spans(const driver_calls *d, l2p_graph_kernels *k, size_t i,
                             CUfunction f, described_sizes *z, size_t *end)
{
    size_t off, size;
    *end = 0;
    k->first_span[i] = z->spans;
    for (size_t j = 0; d->param_info && f && j < 4096 &&
                       d->param_info(f, j, &off, &size) == CUDA_SUCCESS;
         j++) {
        L2P_TRY(room((void **)&k->spans, &z->spans_cap, z->spans + 1, sizeof *k->spans));
        k->spans[z->spans++] = (l2p_param_span){off, size};
        k->kernels[i].num_params = j + 1;
        if (off + size > *end) *end = off + size;
    }
    return L2P_OK;
}

/* Node i's argument bytes, copied in the `extra` form's layout (each parameter at its offset,
 * `end` bytes): a node's parameters cannot be read once its function's module is unloaded
 * (cuGraphKernelNodeGetParams crashed there, H200 6dc4703), and l2persist never changes them. */
static l2p_status take_args(l2p_graph_kernels *k, size_t i, const CUDA_KERNEL_NODE_PARAMS *p,
                            described_sizes *z, size_t end)
{
    size_t extra_size = 0;
    const unsigned char *extra = p->kernelParams ? NULL : l2p_extra_buffer(p->extra, &extra_size);
    k->args_at[i] = z->args;
    k->args_size[i] = 0;
    if (!end) return L2P_OK; /* no parameter (or no layout): no bytes, and k->args may be NULL */
    L2P_TRY(room((void **)&k->args, &z->args_cap, z->args + end, 1));
    unsigned char *dst = k->args + z->args;
    memset(dst, 0, end);
    const l2p_param_span *sp = k->spans + k->first_span[i];
    for (size_t j = 0; p->kernelParams && j < k->kernels[i].num_params; j++)
        memcpy(dst + sp[j].offset, p->kernelParams[j], sp[j].size);
    if (extra) memcpy(dst, extra, extra_size < end ? extra_size : end);
    k->args_size[i] = p->kernelParams ? end : (extra ? (extra_size < end ? extra_size : end) : 0);
    z->args += end;
    return L2P_OK;
}

/* Node i of k: its name, launch shape, parameter spans and argument bytes. */
static l2p_status describe_node(const driver_calls *d, l2p_graph_kernels *k, size_t i,
                                described_sizes *z)
{
    CUDA_KERNEL_NODE_PARAMS p;
    size_t end = 0;
    l2p_kernel_info *out = &k->kernels[i];
    L2P_TRY(node_params(d, k->nodes[i], &p));
    out->node = k->nodes[i];
    out->func = (void *)p.func;
    name_of(d, out->func, out->name);
    out->grid[0] = p.gridDimX, out->grid[1] = p.gridDimY, out->grid[2] = p.gridDimZ;
    out->block[0] = p.blockDimX, out->block[1] = p.blockDimY, out->block[2] = p.blockDimZ;
    out->shared_mem = p.sharedMemBytes;
    L2P_TRY(take_spans(d, k, i, p.func, z, &end));
    return take_args(k, i, &p, z, end);
}

static l2p_status take_described(const driver_calls *d, cudaGraph_t graph, l2p_graph_kernels *k)
{
    size_t n = 0;
    described_sizes z = {0, 0, 0, 0};
    L2P_TRY(l2p_graph_list_kernels(graph, NULL, &n));
    size_t c = n ? n : 1;
    k->nodes = (cudaGraphNode_t *)calloc(c, sizeof *k->nodes);
    k->kernels = (l2p_kernel_info *)calloc(c, sizeof *k->kernels);
    k->first_span = (size_t *)calloc(c, sizeof *k->first_span);
    k->args_at = (size_t *)calloc(c, sizeof *k->args_at);
    k->args_size = (size_t *)calloc(c, sizeof *k->args_size);
    if (!k->nodes || !k->kernels || !k->first_span || !k->args_at || !k->args_size)
        return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory describing %zu nodes", n);
    L2P_TRY(l2p_graph_list_kernels(graph, k->nodes, &n));
    k->n = n < c ? n : c; /* a node added by another thread since the count is left out */
    for (size_t i = 0; i < n; i++) L2P_TRY(describe_node(d, k, i, &z));
    return L2P_OK;
}

l2p_status l2p_graph_kernels_take(int device, cudaGraph_t graph, l2p_graph_kernels *out)
{
    const driver_calls *d;
    int prev;
    memset(out, 0, sizeof *out);
    L2P_TRY(driver(&d));
    L2P_TRY(l2p_device_enter(device, &prev)); /* a library kernel's function is per context */
    l2p_status st = take_described(d, graph, out);
    l2p_device_leave(prev);
    if (st != L2P_OK) l2p_graph_kernels_free(out);
    return st;
}

void l2p_graph_kernels_free(l2p_graph_kernels *k)
{
    free(k->nodes);
    free(k->kernels);
    free(k->spans);
    free(k->first_span);
    free(k->args);
    free(k->args_at);
    free(k->args_size);
    memset(k, 0, sizeof *k);
}

static l2p_status push_use(l2p_graph_scan *s, const l2p_buffer_use *u)
{
    if (!l2p_grow((void **)&s->uses, &s->uses_cap, s->n_uses + 1, sizeof *s->uses, 64))
        return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory scanning kernel arguments");
    s->uses[s->n_uses++] = *u;
    return L2P_OK;
}

/* Every pointer-like word of one parameter that the driver knows as device memory. */
static l2p_status scan_param(const driver_calls *d, l2p_graph_scan *s, size_t kernel,
                             unsigned param, const unsigned char *bytes, size_t offset,
                             size_t size)
{
    enum { MAX_WORDS = 512 }; /* 4 KiB of by-value structs per parameter */
    unsigned offs[MAX_WORDS];
    uint64_t words[MAX_WORDS];
    size_t n = l2p_scan_param_words(bytes, offset, size, offs, words, MAX_WORDS);
    for (size_t i = 0; i < n && i < MAX_WORDS; i++) {
        CUdeviceptr start = 0;
        size_t range = 0;
        if (d->pointer_attr(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, (CUdeviceptr)words[i]) !=
                CUDA_SUCCESS ||
            d->pointer_attr(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)words[i]) !=
                CUDA_SUCCESS || !range)
            continue; /* not device memory: an integer, a host pointer, a freed address */
        l2p_buffer_use u = {kernel, param, offs[i], words[i], (uint64_t)start, (uint64_t)range};
        L2P_TRY(push_use(s, &u));
    }
    return L2P_OK;
}

int l2p_param_in_args(size_t offset, size_t size, size_t args_size)
{
    return size <= args_size && offset <= args_size - size;
}

l2p_status l2p_scan_span_args(l2p_graph_scan *s, size_t kernel, const l2p_param_span *spans,
                              size_t n, void *const *kernel_params, const unsigned char *args,
                              size_t args_size)
{
    const driver_calls *d;
    L2P_TRY(driver(&d));
    for (size_t i = 0; i < n; i++) {
        size_t off = spans[i].offset, size = spans[i].size;
        const unsigned char *bytes = NULL;
        if (kernel_params) bytes = (const unsigned char *)kernel_params[i];
        else if (args && l2p_param_in_args(off, size, args_size)) bytes = args + off;
        if (bytes) L2P_TRY(scan_param(d, s, kernel, (unsigned)i, bytes, off, size));
    }
    return L2P_OK;
}

/* One described node's arguments, from the copy (no call on the node or its function). */
static l2p_status scan_node(l2p_graph_scan *s, const l2p_graph_kernels *k, size_t i)
{
    if (!k->args_size[i]) return L2P_OK; /* no bytes copied: nothing to scan */
    return l2p_scan_span_args(s, i, k->spans + k->first_span[i], k->kernels[i].num_params, NULL,
                              k->args + k->args_at[i], k->args_size[i]);
}

l2p_status l2p_graph_kernels_scan(int device, const l2p_graph_kernels *k, l2p_graph_scan *out)
{
    int prev;
    memset(out, 0, sizeof *out);
    L2P_TRY(l2p_discovery_supported());
    out->kernels = (l2p_kernel_info *)calloc(k->n ? k->n : 1, sizeof *out->kernels);
    if (!out->kernels)
        return l2p_fail(L2P_ERR_NO_MEMORY, "out of host memory scanning %zu nodes", k->n);
    if (k->n) memcpy(out->kernels, k->kernels, k->n * sizeof *out->kernels);
    out->n_kernels = k->n;
    l2p_status st = l2p_device_enter(device, &prev); /* the pointer queries need its context */
    if (st != L2P_OK) {
        l2p_graph_scan_free(out);
        return st;
    }
    for (size_t i = 0; st == L2P_OK && i < k->n; i++) st = scan_node(out, k, i);
    l2p_device_leave(prev);
    if (st != L2P_OK) l2p_graph_scan_free(out);
    return st;
}

void l2p_graph_scan_free(l2p_graph_scan *s)
{
    free(s->kernels);
    free(s->uses);
    memset(s, 0, sizeof *s);
}
