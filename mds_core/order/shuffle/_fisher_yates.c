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

/* A writable, contiguous buffer of packed keys (8-byte items) and a valid index width; 0 on success. */
static int packed_keys_buffer(PyObject *array, int index_bits, Py_buffer *view) {
    if (PyObject_GetBuffer(array, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    if (view->itemsize != 8 || index_bits < 0 || index_bits > 62) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "packed keys need 8-byte items and 0 <= index_bits <= 62");
        return -1;
    }
    return 0;
}

/*
 * pack_uniform_keys(capsule, packed, first_index, low, high, scale, index_bits) -> largest fixed-point key
 *
 * py1e's keys for consecutive samples i = first_index .. first_index + len(packed) - 1, packed for
 * sorting: numpy's uniform(low, high) draw u = low + (high - low) * next_double (its
 * random_uniform, one draw per sample, in order), key = double(i) + u as the reference adds them,
 * then floor(key * scale) << index_bits | i. Built with -ffp-contract=off, so every operation
 * rounds as numpy's does. Returns None (with the generator advanced part way) if a key falls
 * outside [0, 2**(63 - index_bits) / scale), which the caller's bounds rule out.
 */
static PyObject *py_pack_uniform_keys(PyObject *self, PyObject *args) {
    PyObject *capsule, *array;
    long long first_index;
    double low, high, scale;
    int index_bits;
    if (!PyArg_ParseTuple(args, "OOLdddi", &capsule, &array, &first_index, &low, &high, &scale, &index_bits)) {
        return NULL;
    }
    bitgen_t *bg = bitgen_of(capsule);
    if (bg == NULL) {
        return NULL;
    }
    Py_buffer view;
    if (packed_keys_buffer(array, index_bits, &view) < 0) {
        return NULL;
    }
    uint64_t *packed = (uint64_t *)view.buf;
    int64_t count = (int64_t)(view.len / 8);
    double range = high - low;
    double limit = (double)(((uint64_t)1) << (63 - index_bits));
    long long largest = -1;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t k = 0; k < count; k++) {
        int64_t index = (int64_t)first_index + k;
        double u = low + range * bg->next_double(bg->state);
        double scaled = ((double)index + u) * scale;
        if (!(scaled >= 0.0 && scaled < limit)) {
            largest = -2;
            break;
        }
        int64_t fixed = (int64_t)scaled;
        if (fixed > largest) {
            largest = fixed;
        }
        packed[k] = ((uint64_t)fixed << index_bits) | (uint64_t)index;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (largest == -2) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLongLong(largest);
}

/*
 * unpack_sorted_keys(packed, index_bits) -> list of collision slots
 *
 * One pass over sorted packed keys: the slots s whose fixed-point key equals slot s + 1's (their
 * packed values differ only in the index bits), then every value reduced to its index.
 */
static PyObject *py_unpack_sorted_keys(PyObject *self, PyObject *args) {
    PyObject *array;
    int index_bits;
    if (!PyArg_ParseTuple(args, "Oi", &array, &index_bits)) {
        return NULL;
    }
    Py_buffer view;
    if (packed_keys_buffer(array, index_bits, &view) < 0) {
        return NULL;
    }
    uint64_t *packed = (uint64_t *)view.buf;
    int64_t count = (int64_t)(view.len / 8);
    uint64_t limit = ((uint64_t)1) << index_bits, mask = limit - 1;
    PyObject *slots = PyList_New(0);
    if (slots == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    for (int64_t i = 0; i < count; i++) {
        if (i + 1 < count && (packed[i + 1] ^ packed[i]) < limit) {
            PyObject *slot = PyLong_FromLongLong(i);
            if (slot == NULL || PyList_Append(slots, slot) < 0) {
                Py_XDECREF(slot);
                Py_DECREF(slots);
                PyBuffer_Release(&view);
                return NULL;
            }
            Py_DECREF(slot);
        }
        packed[i] &= mask;
    }
    PyBuffer_Release(&view);
    return slots;
}

static PyMethodDef methods[] = {
    {"unpack_sorted_keys", py_unpack_sorted_keys, METH_VARARGS, "Collision slots of sorted packed keys; unpack them."},
    {"pack_uniform_keys", py_pack_uniform_keys, METH_VARARGS, "py1e's keys for a run of samples, drawn and packed."},
    {"shuffle", py_shuffle, METH_VARARGS, "Generator.shuffle of a contiguous int32/int64 array, faster."},
    {"skip", py_skip, METH_VARARGS, "Advance a bit generator as a shuffle of n elements would."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fisher_yates", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fisher_yates(void) { return PyModule_Create(&module); }
