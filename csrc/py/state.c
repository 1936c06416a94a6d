/* The module state (state.h): found from a module or from a type, and the references it
 * holds. Depends on no other file of the extension. */
#include "l2p_py.h"

static PyModuleDef *module_def; /* set once by PyInit, before any type is made */

void l2p_state_bind(PyModuleDef *def)
{
    module_def = def;
}

l2p_state *l2p_state_from_module(PyObject *module)
{
    return (l2p_state *)PyModule_GetState(module);
}

l2p_state *l2p_state_from_type(PyTypeObject *type)
{
    PyObject *m = PyType_GetModuleByDef(type, module_def);
    return m ? l2p_state_from_module(m) : NULL;
}

PyTypeObject *l2p_make_type(PyObject *m, PyType_Spec *spec, PyObject *base)
{
    PyObject *t = PyType_FromModuleAndSpec(m, spec, base);
    if (!t) return NULL;
    if (PyModule_AddType(m, (PyTypeObject *)t) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return (PyTypeObject *)t;
}

PyObject *l2p_access_property(l2p_state *st, int value)
{
    return PyObject_CallFunction(st->AccessProperty, "i", value);
}

int l2p_state_traverse(l2p_state *st, visitproc visit, void *arg)
{
    Py_VISIT(st->CudaError);
    Py_VISIT(st->CudaMemoryError);
    Py_VISIT(st->NotSupportedError);
    Py_VISIT(st->NoDeviceError);
    Py_VISIT(st->AccessProperty);
    Py_VISIT(st->Device);
    Py_VISIT(st->DeviceProperties);
    Py_VISIT(st->DeviceBuffer);
    Py_VISIT(st->Stream);
    Py_VISIT(st->AccessPolicyWindow);
    Py_VISIT(st->Graph);
    Py_VISIT(st->KernelNode);
    Py_VISIT(st->Scope);
    Py_VISIT(st->Plan);
    Py_VISIT(st->ReplayCount);
    return 0;
}

void l2p_state_clear(l2p_state *st)
{
    Py_CLEAR(st->CudaError);
    Py_CLEAR(st->CudaMemoryError);
    Py_CLEAR(st->NotSupportedError);
    Py_CLEAR(st->NoDeviceError);
    Py_CLEAR(st->AccessProperty);
    Py_CLEAR(st->Device);
    Py_CLEAR(st->DeviceProperties);
    Py_CLEAR(st->DeviceBuffer);
    Py_CLEAR(st->Stream);
    Py_CLEAR(st->AccessPolicyWindow);
    Py_CLEAR(st->Graph);
    Py_CLEAR(st->KernelNode);
    Py_CLEAR(st->Scope);
    Py_CLEAR(st->Plan);
    Py_CLEAR(st->ReplayCount);
}
