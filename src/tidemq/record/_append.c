/* placeholder, filled in by the compiled-core work */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tidemq.record._append", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__append(void) { return PyModule_Create(&module); }
