/* Foreign graphs, discovery and capture safety: module-level functions. */
#include "l2p_py.h"

#include "l2p_release.h"

static PyObject *release_pending(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    return PyLong_FromSize_t(l2p_release_pending());
}

static PyObject *release_drain(PyObject *m, PyObject *noargs)
{
    (void)m;
    (void)noargs;
    l2p_release_drain();
    return PyLong_FromSize_t(l2p_release_pending());
}

PyMethodDef l2p_foreign_functions[] = {
    {"_release_pending", release_pending, METH_NOARGS,
     "_release_pending()\n--\n\nReleases (frees, destroys) deferred because a capture refused "
     "them; drained at the next allocation, graph launch and at teardown."},
    {"_release_drain", release_drain, METH_NOARGS,
     "_release_drain()\n--\n\nRetry the deferred releases now; returns how many still wait."},
    {NULL, NULL, 0, NULL}};
