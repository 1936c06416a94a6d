/* Discovery's raw results as Python tuples, shared by Graph._scan (a graph's kernel nodes) and
 * _launch_log (eager launches): both fill an l2p_graph_scan, group its uses against the
 * offered tensors with l2p_buffers_build, and hand l2persist.foreign the same
 * (kernels, records, uses) tuples. */
#include "l2p_py.h"

#include <stdlib.h>

PyObject *l2p_py_shape3(const unsigned v[3])
{
    return Py_BuildValue("(III)", v[0], v[1], v[2]);
}

/* One offer: a (ptr, nbytes) pair of ints >= 0. */
static int offer_pair(PyObject *item, Py_ssize_t i, l2p_offer *out)
{
    unsigned long long v[2];
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_Format(PyExc_TypeError, "offers[%zd]: expected a (ptr, nbytes) tuple, got %s", i,
                     Py_TYPE(item)->tp_name);
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        PyObject *x = PyTuple_GET_ITEM(item, k);
        v[k] = PyLong_Check(x) && !PyBool_Check(x) ? PyLong_AsUnsignedLongLong(x) : (unsigned long long)-1;
        if (v[k] == (unsigned long long)-1) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "offers[%zd]: %s must be an int in [0, 2^64 - 2]", i,
                         k ? "nbytes" : "ptr");
            return -1;
        }
    }
    out->ptr = v[0];
    out->nbytes = v[1];
    return 0;
}

/* Parse offers: a sequence of (ptr, nbytes) int pairs. */
static int parse_offers(PyObject *obj, l2p_offer **out, size_t *n)
{
    PyObject *seq = PySequence_Fast(obj, "offers: expected a sequence of (ptr, nbytes) tuples");
    *out = NULL;
    *n = 0;
    if (!seq) return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    *out = PyMem_Calloc((size_t)len + 1, sizeof **out);
    if (!*out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        if (offer_pair(PySequence_Fast_GET_ITEM(seq, i), i, &(*out)[i]) < 0) {
            Py_DECREF(seq);
            PyMem_Free(*out);
            *out = NULL;
            return -1;
        }
    }
    *n = (size_t)len;
    Py_DECREF(seq);
    return 0;
}

static PyObject *tuples(const l2p_graph_scan *sc, const l2p_buffer_record *rec, size_t nrec,
                             const size_t *record_of)
{
    PyObject *kernels = PyList_New((Py_ssize_t)sc->n_kernels);
    PyObject *records = PyList_New((Py_ssize_t)nrec);
    PyObject *uses = PyList_New((Py_ssize_t)sc->n_uses);
    for (size_t i = 0; kernels && records && uses && i < sc->n_kernels; i++) {
        const l2p_kernel_info *k = &sc->kernels[i];
        PyObject *t = Py_BuildValue("(nsNNIn)", (Py_ssize_t)i, k->name, l2p_py_shape3(k->grid),
                                    l2p_py_shape3(k->block), k->shared_mem,
                                    (Py_ssize_t)k->num_params);
        if (!t) Py_CLEAR(kernels);
        else PyList_SET_ITEM(kernels, (Py_ssize_t)i, t);
    }
    for (size_t i = 0; kernels && records && uses && i < nrec; i++) {
        PyObject *t = Py_BuildValue("(KKl)", (unsigned long long)rec[i].address,
                                    (unsigned long long)rec[i].size, rec[i].offer);
        if (!t) Py_CLEAR(records);
        else PyList_SET_ITEM(records, (Py_ssize_t)i, t);
    }
    for (size_t i = 0; kernels && records && uses && i < sc->n_uses; i++) {
        const l2p_buffer_use *u = &sc->uses[i];
        PyObject *t = Py_BuildValue("(nIIKn)", (Py_ssize_t)u->kernel, u->param, u->offset,
                                    (unsigned long long)u->word, (Py_ssize_t)record_of[i]);
        if (!t) Py_CLEAR(uses);
        else PyList_SET_ITEM(uses, (Py_ssize_t)i, t);
    }
    if (!kernels || !records || !uses) {
        Py_XDECREF(kernels);
        Py_XDECREF(records);
        Py_XDECREF(uses);
        return NULL;
    }
    return Py_BuildValue("(NNN)", kernels, records, uses);
}

PyObject *l2p_py_scan_tuples(l2p_state *st, l2p_graph_scan *sc, PyObject *offers_obj)
{
    l2p_offer *offers = NULL;
    size_t n_offers = 0, nrec = 0;
    l2p_buffer_record *rec = NULL;
    size_t *record_of = NULL;
    PyObject *r = NULL;
    if (parse_offers(offers_obj, &offers, &n_offers) < 0) goto done;
    record_of = PyMem_Calloc(sc->n_uses + 1, sizeof *record_of);
    if (!record_of) PyErr_NoMemory();
    else if (l2p_buffers_build(sc->uses, sc->n_uses, offers, n_offers, &rec, &nrec, record_of) !=
             L2P_OK)
        l2p_py_raise(st);
    else r = tuples(sc, rec, nrec, record_of);
done:
    free(rec);
    PyMem_Free(record_of);
    PyMem_Free(offers);
    l2p_graph_scan_free(sc);
    return r;
}
