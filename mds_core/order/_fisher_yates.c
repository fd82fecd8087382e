/*
 * numpy's Generator.shuffle for 1-D int32/int64 arrays, draw for draw, without its cache misses.
 *
 * numpy's Fisher-Yates draws j = random_interval(i) for i = n-1 .. 1 and swaps a[i] and a[j]
 * straight away, so every step waits for a cache miss on a[j] (50-90 ns once the array outgrows
 * L2). Here the draws of a batch of steps are made first, with a prefetch of each a[j], and the
 * swaps follow in the same order: the result and the generator's state are exactly numpy's, and
 * the misses overlap. The draws go through the generator's own bitgen_t (numpy's documented
 * "BitGenerator" capsule), so every bit generator and its buffered 32-bit output work unchanged.
 *
 * The caller holds the bit generator's lock (as numpy's own methods do), so the GIL is released
 * while shuffling and other threads can shuffle other arrays meanwhile.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* numpy/random/bitgen.h, a stable ABI */
typedef struct bitgen {
    void *state;
    uint64_t (*next_uint64)(void *st);
    uint32_t (*next_uint32)(void *st);
    double (*next_double)(void *st);
    uint64_t (*next_raw)(void *st);
} bitgen_t;

/* numpy/random/src/distributions/distributions.c: random_interval */
static inline uint64_t random_interval(bitgen_t *bg, uint64_t max) {
    uint64_t mask = max, value;
    if (max == 0) {
        return 0;
    }
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    if (max <= 0xffffffffUL) {
        while ((value = (bg->next_uint32(bg->state) & mask)) > max)
            ;
    } else {
        while ((value = (bg->next_uint64(bg->state) & mask)) > max)
            ;
    }
    return value;
}

#define BATCH 32

#define DEFINE_SHUFFLE(NAME, TYPE)                                          \
    static void NAME(bitgen_t *bg, TYPE *a, int64_t n) {                    \
        uint64_t js[BATCH];                                                 \
        int64_t i = n - 1;                                                  \
        while (i >= 1) {                                                    \
            int64_t count = i < BATCH ? i : BATCH;                          \
            for (int64_t t = 0; t < count; t++) {                           \
                js[t] = random_interval(bg, (uint64_t)(i - t));             \
                __builtin_prefetch(a + js[t], 1);                           \
            }                                                               \
            for (int64_t t = 0; t < count; t++) {                           \
                TYPE held = a[js[t]];                                       \
                a[js[t]] = a[i - t];                                        \
                a[i - t] = held;                                            \
            }                                                               \
            i -= count;                                                     \
        }                                                                   \
    }

DEFINE_SHUFFLE(shuffle_int32, int32_t)
DEFINE_SHUFFLE(shuffle_int64, int64_t)

static bitgen_t *bitgen_of(PyObject *capsule) {
    return (bitgen_t *)PyCapsule_GetPointer(capsule, "BitGenerator");
}

/* shuffle(capsule, array): array is a writable, C-contiguous buffer of int32 or int64 ("i"/"l"/"q"). */
static PyObject *py_shuffle(PyObject *self, PyObject *args) {
    PyObject *capsule, *array;
    if (!PyArg_ParseTuple(args, "OO", &capsule, &array)) {
        return NULL;
    }
    bitgen_t *bg = bitgen_of(capsule);
    if (bg == NULL) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(array, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return NULL;
    }
    int64_t n = (int64_t)(view.len / (view.itemsize ? view.itemsize : 1));
    if (view.itemsize != 4 && view.itemsize != 8) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "shuffle needs 4- or 8-byte integer items");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (view.itemsize == 4) {
        shuffle_int32(bg, (int32_t *)view.buf, n);
    } else {
        shuffle_int64(bg, (int64_t *)view.buf, n);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* skip(capsule, n): the draws of a shuffle of n elements, and nothing else. */
static PyObject *py_skip(PyObject *self, PyObject *args) {
    PyObject *capsule;
    long long n;
    if (!PyArg_ParseTuple(args, "OL", &capsule, &n)) {
        return NULL;
    }
    bitgen_t *bg = bitgen_of(capsule);
    if (bg == NULL) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = (int64_t)n - 1; i >= 1; i--) {
        random_interval(bg, (uint64_t)i);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"shuffle", py_shuffle, METH_VARARGS, "Generator.shuffle of a contiguous int32/int64 array, faster."},
    {"skip", py_skip, METH_VARARGS, "Advance a bit generator as a shuffle of n elements would."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fisher_yates", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fisher_yates(void) { return PyModule_Create(&module); }
