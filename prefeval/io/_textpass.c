/* One pass over the text of a TREC run file: the rank positions of the relevant
 * documents, each query's depth and a duplicate check, without a dictionary of every
 * docno (prefeval.io.textpass wraps it; prefeval.io.text is the reader it mirrors).
 *
 * The pass reads only lines it is certain the text reader reads the same way and
 * returns None on anything else (a line of fewer than five fields, a NUL byte, invalid
 * UTF-8, a score that is not a plain finite decimal number, a query whose lines are not
 * one contiguous block, a document twice for a query, a file with no data line): the
 * text reader then reads the file and words any error.
 *
 * Lines end at \n, \r\n or a lone \r; fields are separated by runs of ' ', \t, \v and
 * \f (with the line ends, the bytes Python's bytes.split() and Arrow's ASCII whitespace
 * kernels split on); blank lines and lines whose first field starts with '#' are
 * skipped; one leading UTF-8 byte order mark is dropped.  Fields 0, 2 and 4 are the
 * query id, the docno and the score; the rest are ignored.
 *
 * Order within a query (trec_eval's): score descending, ties by docno descending
 * (byte-wise, as Arrow sorts strings).  A query's rows are ranked from file order where
 * its block is already sorted by score descending (only tie groups holding a relevant
 * document sorted, by docno), else the block is sorted whole.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <float.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ hashing */

static inline uint64_t mix64(uint64_t h)
{
    /* splitmix64's finalizer */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

/* a 64 by 64 bit multiplication folded to 64 bits (wyhash's mixing step) */
static inline uint64_t mum(uint64_t a, uint64_t b)
{
#ifdef __SIZEOF_INT128__
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
#else
    return mix64(a ^ mix64(b));
#endif
}

static inline uint64_t read8(const unsigned char *s)
{
    uint64_t v;
    memcpy(&v, s, 8);
    return v;
}

static inline uint64_t read4(const unsigned char *s)
{
    uint32_t v;
    memcpy(&v, s, 4);
    return v;
}

#define K1 0xa0761d6478bd642fULL
#define K2 0xe7037ed1a0b428dbULL
#define K3 0x8ebc6af09c88c6e3ULL

/* a 64-bit hash of s[0:n]; every byte counts (a hash only: equal hashes are confirmed
 * on the bytes) */
static inline uint64_t hash_bytes(const unsigned char *s, size_t n)
{
    uint64_t a, b, h = K3 ^ (uint64_t)n;
    if (n <= 16) {
        if (n >= 8)
            a = read8(s), b = read8(s + n - 8);
        else if (n >= 4)
            a = read4(s), b = read4(s + n - 4);
        else if (n > 0)
            a = ((uint64_t)s[0] << 16) | ((uint64_t)s[n / 2] << 8) | s[n - 1], b = 0;
        else
            a = b = 0;
    }
    else {
        size_t i = 0;
        for (; i + 16 < n; i += 16)
            h = mum(read8(s + i) ^ K1, read8(s + i + 8) ^ h);
        a = read8(s + n - 16), b = read8(s + n - 8);
    }
    return mix64(mum(a ^ K1, b ^ K2 ^ h));
}

static size_t table_size(size_t n)
{
    size_t size = 16;
    while (size < 2 * n + 2)
        size <<= 1;
    return size;
}

/* ------------------------------------------------------------------ relevant documents */

/* a hash table's slot: a key's hash and its index + 1 (0: an empty slot) */
typedef struct {
    uint64_t hash;
    int64_t index;
} Slot;

/* A string stored in a blob: offset and length. */
typedef struct {
    size_t at;
    size_t len;
    uint64_t hash;
} Key;

typedef struct {
    PyObject_HEAD
    unsigned char *blob;
    Py_ssize_t n_queries;
    Key *queries;       /* query k's id */
    size_t qmask;
    int64_t *qslots;    /* index + 1 into queries, 0: empty */
    Py_ssize_t n_docs;
    Key *docs;          /* global document g's docno */
    /* a hash table of each query's relevant docnos (small: it stays in the cache while
     * the query's block is read): slots tbase[k] to tbase[k] + tmask[k] of dslots */
    size_t *tbase;
    size_t *tmask;
    Slot *dslots;       /* (docno hash, g + 1), g + 1 == 0: empty */
} RelevantObject;

static void relevant_dealloc(RelevantObject *self)
{
    PyMem_RawFree(self->blob);
    PyMem_RawFree(self->queries);
    PyMem_RawFree(self->qslots);
    PyMem_RawFree(self->docs);
    PyMem_RawFree(self->tbase);
    PyMem_RawFree(self->tmask);
    PyMem_RawFree(self->dslots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int64_t find_query(const RelevantObject *rel, const unsigned char *s, size_t n,
                          uint64_t h)
{
    size_t i = h & rel->qmask;
    for (;;) {
        int64_t slot = rel->qslots[i];
        if (slot == 0)
            return -1;
        const Key *k = &rel->queries[slot - 1];
        if (k->hash == h && k->len == n && memcmp(rel->blob + k->at, s, n) == 0)
            return slot - 1;
        i = (i + 1) & rel->qmask;
    }
}

/* global document number of (query, docno), -1 where not relevant */
static int64_t find_doc(const RelevantObject *rel, int64_t query, const unsigned char *s,
                        size_t n, uint64_t h)
{
    const Slot *table = rel->dslots + rel->tbase[query];
    size_t mask = rel->tmask[query], i = h & mask;
    for (;;) {
        const Slot *slot = &table[i];
        if (slot->index == 0)
            return -1;
        if (slot->hash == h) {
            const Key *k = &rel->docs[slot->index - 1];
            if (k->len == n && memcmp(rel->blob + k->at, s, n) == 0)
                return slot->index - 1;
        }
        i = (i + 1) & mask;
    }
}

/* Relevant(query_ids, offsets, docnos): query_ids a list of bytes (query k's id),
 * offsets a list of n_queries + 1 ints (query k owns documents offsets[k]:offsets[k+1]),
 * docnos a list of bytes (global document g's docno).  ValueError on a query id or a
 * (query, docno) given twice. */
static PyObject *relevant_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *qids, *offsets, *docnos;
    static char *names[] = {"query_ids", "offsets", "docnos", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!", names, &PyList_Type, &qids,
                                     &PyList_Type, &offsets, &PyList_Type, &docnos))
        return NULL;
    Py_ssize_t nq = PyList_GET_SIZE(qids), nd = PyList_GET_SIZE(docnos);
    if (PyList_GET_SIZE(offsets) != nq + 1) {
        PyErr_SetString(PyExc_ValueError, "offsets must have one more item than query_ids");
        return NULL;
    }
    size_t total = 1;
    for (Py_ssize_t i = 0; i < nq; i++) {
        PyObject *item = PyList_GET_ITEM(qids, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "query ids must be bytes");
            return NULL;
        }
        total += (size_t)PyBytes_GET_SIZE(item);
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        PyObject *item = PyList_GET_ITEM(docnos, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "docnos must be bytes");
            return NULL;
        }
        total += (size_t)PyBytes_GET_SIZE(item);
    }
    RelevantObject *self = (RelevantObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->n_queries = nq;
    self->n_docs = nd;
    self->qmask = table_size((size_t)nq) - 1;
    self->blob = PyMem_RawMalloc(total);
    self->queries = PyMem_RawMalloc(sizeof(Key) * (size_t)(nq + 1));
    self->qslots = PyMem_RawCalloc(self->qmask + 1, sizeof(int64_t));
    self->docs = PyMem_RawMalloc(sizeof(Key) * (size_t)(nd + 1));
    self->tbase = PyMem_RawMalloc(sizeof(size_t) * (size_t)(nq + 1));
    self->tmask = PyMem_RawMalloc(sizeof(size_t) * (size_t)(nq + 1));
    if (!self->blob || !self->queries || !self->qslots || !self->docs || !self->tbase ||
        !self->tmask) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    size_t slots = 0;
    for (Py_ssize_t k = 0, g = 0; k < nq; k++) {
        long long lo = PyLong_AsLongLong(PyList_GET_ITEM(offsets, k));
        long long hi = PyLong_AsLongLong(PyList_GET_ITEM(offsets, k + 1));
        if (PyErr_Occurred()) {
            Py_DECREF(self);
            return NULL;
        }
        if (lo != g || hi < lo || hi > nd || (k == nq - 1 && hi != nd)) {
            Py_DECREF(self);
            PyErr_SetString(PyExc_ValueError, "offsets must rise from 0 to len(docnos)");
            return NULL;
        }
        g = hi;
        self->tbase[k] = slots;
        self->tmask[k] = table_size((size_t)(hi - lo)) - 1;
        slots += self->tmask[k] + 1;
    }
    if (nq == 0 && nd != 0) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_ValueError, "offsets must rise from 0 to len(docnos)");
        return NULL;
    }
    self->dslots = PyMem_RawCalloc(slots + 1, sizeof(Slot));
    if (self->dslots == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    size_t at = 0;
    for (Py_ssize_t k = 0; k < nq; k++) {
        PyObject *item = PyList_GET_ITEM(qids, k);
        size_t n = (size_t)PyBytes_GET_SIZE(item);
        const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(item);
        memcpy(self->blob + at, s, n);
        uint64_t h = hash_bytes(s, n);
        if (find_query(self, s, n, h) >= 0) {
            Py_DECREF(self);
            PyErr_SetString(PyExc_ValueError, "a query id given twice");
            return NULL;
        }
        self->queries[k] = (Key){at, n, h};
        size_t i = h & self->qmask;
        while (self->qslots[i])
            i = (i + 1) & self->qmask;
        self->qslots[i] = k + 1;
        at += n;
    }
    Py_ssize_t g = 0;
    for (Py_ssize_t k = 0; k < nq; k++) {
        Py_ssize_t hi = (Py_ssize_t)PyLong_AsLongLong(PyList_GET_ITEM(offsets, k + 1));
        Slot *table = self->dslots + self->tbase[k];
        size_t mask = self->tmask[k];
        for (; g < hi; g++) {
            PyObject *item = PyList_GET_ITEM(docnos, g);
            size_t n = (size_t)PyBytes_GET_SIZE(item);
            const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(item);
            memcpy(self->blob + at, s, n);
            uint64_t h = hash_bytes(s, n);
            if (find_doc(self, k, s, n, h) >= 0) {
                Py_DECREF(self);
                PyErr_SetString(PyExc_ValueError, "a (query, docno) given twice");
                return NULL;
            }
            self->docs[g] = (Key){at, n, h};
            size_t i = h & mask;
            while (table[i].index)
                i = (i + 1) & mask;
            table[i] = (Slot){h, g + 1};
            at += n;
        }
    }
    return (PyObject *)self;
}

static PyTypeObject RelevantType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prefeval.io._textpass.Relevant",
    .tp_basicsize = sizeof(RelevantObject),
    .tp_dealloc = (destructor)relevant_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The relevant documents of a relevance level, hashed by (query, docno).",
    .tp_new = relevant_new,
};

/* ------------------------------------------------------------------ text */

/* 1: field separator, 2: line end; the bytes bytes.split() splits on */
static unsigned char byte_class[256];

static void init_classes(void)
{
    byte_class[' '] = byte_class['\t'] = byte_class['\v'] = byte_class['\f'] = 1;
    byte_class['\n'] = byte_class['\r'] = 2;
}

/* whether s[0:n] holds no NUL byte and is valid UTF-8 as Python decodes it (no overlong
 * form, no surrogate, nothing above U+10FFFF) */
static int valid_text(const unsigned char *s, size_t n)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(((v - ones) & ~v & highs) | (v & highs))) { /* no NUL, all ASCII */
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c == 0)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t more;
        unsigned char lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
            more = 1;
        else if (c >= 0xe0 && c <= 0xef) {
            more = 2;
            if (c == 0xe0)
                lo = 0xa0;
            else if (c == 0xed)
                hi = 0x9f;
        }
        else if (c >= 0xf0 && c <= 0xf4) {
            more = 3;
            if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f;
        }
        else
            return 0;
        if (n - i <= more)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t j = 2; j <= more; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
        i += more + 1;
    }
    return 1;
}

static const double POW10[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* the longest score the pass parses (a longer one: declined) */
#define MAX_NUMBER 100

/* A plain decimal number as both Arrow's parser and strtod read it:
 * [+-]? (digits [. digits*]? | . digits) ([eE] [+-]? digits)?, finite, not underflowing
 * (strtod's ERANGE), with at most 4 exponent digits; 0 where the field is anything
 * else.  Both are correctly rounded: the value is the double nearest the decimal. */
static int parse_score(const unsigned char *s, size_t n, double *out)
{
    if (n == 0 || n > MAX_NUMBER)
        return 0;
    size_t i = 0, digits = 0;
    int negative = 0, sig = 0, e10 = 0;
    uint64_t w = 0; /* the first 19 significant digits */
    if (s[0] == '+' || s[0] == '-')
        negative = s[i++] == '-';
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++)
        if (sig || s[i] != '0') {
            if (++sig <= 19)
                w = w * 10 + (uint64_t)(s[i] - '0');
            else
                e10++;
        }
    if (i < n && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
            if (!sig && s[i] == '0')
                e10--; /* a leading zero */
            else if (++sig <= 19) {
                w = w * 10 + (uint64_t)(s[i] - '0');
                e10--;
            }
        }
    }
    if (digits == 0)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        int sign = 1, x = 0, exp_digits = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            sign = s[i++] == '-' ? -1 : 1;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, exp_digits++)
            x = x * 10 + (s[i] - '0');
        if (exp_digits == 0 || exp_digits > 4)
            return 0;
        e10 += sign * x;
    }
    if (i != n)
        return 0;
#if FLT_EVAL_METHOD == 0
    /* Clinger's fast path: an integer below 2**53 times or over a power of ten up to
     * 1e22 (both exact doubles) is one correctly rounded operation */
    if (sig <= 19 && w <= (1ULL << 53) && e10 >= -22 && e10 <= 22) {
        double v = (double)w;
        v = e10 >= 0 ? v * POW10[e10] : v / POW10[-e10];
        *out = negative ? -v : v;
        return 1;
    }
#endif
    char text[MAX_NUMBER + 1];
    memcpy(text, s, n);
    text[n] = 0;
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (end != text + n || errno != 0)
        return 0;
    if (!(value - value == 0.0)) /* inf (an overflow) or nan */
        return 0;
    *out = value;
    return 1;
}

/* ------------------------------------------------------------------ the pass */

typedef struct {
    double score;
    const unsigned char *doc;
    size_t len;
    uint64_t hash;
    int64_t gid; /* global relevant-document number, -1: not relevant */
} Row;

typedef struct {
    int64_t gid;
    int32_t rank;
} Hit;

/* an evaluated query's rows in the ranking (ranking mode): out[start:start + count] */
typedef struct {
    int64_t query;
    size_t start, count;
} Block;

typedef struct {
    const RelevantObject *rel;
    long long max_docs; /* < 0: none */
    int full; /* ranking mode: every row of the evaluated queries, in trec order */
    Row *out;
    size_t n_out, cap_out;
    Block *blocks;
    size_t n_blocks, cap_blocks;
    Row *rows;
    size_t n_rows, cap_rows;
    int64_t *dup; /* duplicate check: row index + 1, 0: empty */
    size_t cap_dup;
    Hit *hits;
    size_t n_hits, cap_hits;
    int64_t *retrieved;
    /* the query ids met so far (each block's first line): start, length, hash */
    Key *seen;
    size_t n_seen, cap_seen;
    int64_t *seen_slots;
    size_t seen_mask;
    const unsigned char *data;
    int nomem;
} Pass;

static int grow(void **items, size_t *cap, size_t need, size_t size, int *nomem)
{
    if (need <= *cap)
        return 1;
    size_t cap2 = *cap ? *cap : 256;
    while (cap2 < need)
        cap2 *= 2;
    void *p = realloc(*items, cap2 * size);
    if (p == NULL) {
        *nomem = 1;
        return 0;
    }
    *items = p;
    *cap = cap2;
    return 1;
}

/* descending (score, docno), docno compared byte-wise */
static int doc_desc(const Row *a, const Row *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->doc, b->doc, n);
    if (c != 0)
        return c > 0 ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return 0;
}

static int by_docno_desc(const void *pa, const void *pb)
{
    return doc_desc((const Row *)pa, (const Row *)pb);
}

static int by_trec_order(const void *pa, const void *pb)
{
    const Row *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return doc_desc(a, b);
}

static int by_gid(const void *pa, const void *pb)
{
    const Hit *a = pa, *b = pb;
    return a->gid < b->gid ? -1 : a->gid > b->gid;
}

/* 1: a query id met before (its lines are not one block); else records it */
static int seen_before(Pass *p, const unsigned char *s, size_t n)
{
    uint64_t h = hash_bytes(s, n);
    if (2 * (p->n_seen + 1) > p->seen_mask + 1 || p->seen_slots == NULL) {
        size_t size = table_size(p->n_seen + 1) * 2;
        int64_t *slots = calloc(size, sizeof(int64_t));
        if (slots == NULL) {
            p->nomem = 1;
            return 1;
        }
        for (size_t k = 0; k < p->n_seen; k++) {
            size_t i = p->seen[k].hash & (size - 1);
            while (slots[i])
                i = (i + 1) & (size - 1);
            slots[i] = (int64_t)k + 1;
        }
        free(p->seen_slots);
        p->seen_slots = slots;
        p->seen_mask = size - 1;
    }
    size_t i = h & p->seen_mask;
    while (p->seen_slots[i]) {
        const Key *k = &p->seen[p->seen_slots[i] - 1];
        if (k->hash == h && k->len == n && memcmp(p->data + k->at, s, n) == 0)
            return 1;
        i = (i + 1) & p->seen_mask;
    }
    if (!grow((void **)&p->seen, &p->cap_seen, p->n_seen + 1, sizeof(Key), &p->nomem))
        return 1;
    p->seen[p->n_seen] = (Key){(size_t)(s - p->data), n, h};
    p->seen_slots[i] = (int64_t)(++p->n_seen);
    return 0;
}

/* A block's rows in trec order (score descending, ties by docno descending): taken from
 * the file's order where it is sorted by score, only its tie groups sorted by docno
 * (``every_tie``: all of them; else those holding a relevant document, the only rows
 * whose ranks are kept), else the whole block sorted. */
static void trec_sort(Row *rows, size_t n, int every_tie)
{
    int sorted = 1;
    for (size_t r = 1; r < n; r++)
        if (!(rows[r].score <= rows[r - 1].score)) {
            sorted = 0;
            break;
        }
    if (!sorted) {
        qsort(rows, n, sizeof(Row), by_trec_order);
        return;
    }
    for (size_t a = 0; a < n;) {
        size_t b = a + 1;
        int hit = every_tie || rows[a].gid >= 0;
        while (b < n && rows[b].score == rows[a].score)
            hit |= rows[b++].gid >= 0;
        if (b - a > 1 && hit)
            qsort(rows + a, b - a, sizeof(Row), by_docno_desc);
        a = b;
    }
}

/* ranking mode: the block's rows (of evaluated query ``query``) in trec order, the
 * first ``depth`` of them added to the ranking */
static int rank_block(Pass *p, int64_t query, size_t depth)
{
    Row *rows = p->rows;
    trec_sort(rows, p->n_rows, 1);
    if (!grow((void **)&p->out, &p->cap_out, p->n_out + depth, sizeof(Row), &p->nomem) ||
        !grow((void **)&p->blocks, &p->cap_blocks, p->n_blocks + 1, sizeof(Block), &p->nomem))
        return 0;
    memcpy(p->out + p->n_out, rows, depth * sizeof(Row));
    p->blocks[p->n_blocks++] = (Block){query, p->n_out, depth};
    p->n_out += depth;
    return 1;
}

/* Ends the block of rows of query ``query`` (-1: not evaluated): 0 where it holds a
 * docno twice (or memory ran out), else its relevant rows' ranks are added. */
static int end_block(Pass *p, int64_t query)
{
    size_t n = p->n_rows;
    if (n == 0)
        return 1;
    if (n > 0x7fffffff)
        return 0;
    /* duplicates: hash of the docno (the query is the block's), confirmed on bytes */
    size_t size = table_size(n);
    if (size > p->cap_dup) {
        free(p->dup);
        p->dup = malloc(size * sizeof(int64_t));
        if (p->dup == NULL) {
            p->cap_dup = 0;
            p->nomem = 1;
            return 0;
        }
        p->cap_dup = size;
    }
    memset(p->dup, 0, size * sizeof(int64_t));
    size_t mask = size - 1;
    int relevant = 0;
    for (size_t r = 0; r < n; r++) {
        const Row *row = &p->rows[r];
        size_t i = row->hash & mask;
        while (p->dup[i]) {
            const Row *other = &p->rows[p->dup[i] - 1];
            if (other->hash == row->hash && other->len == row->len &&
                memcmp(other->doc, row->doc, row->len) == 0)
                return 0;
            i = (i + 1) & mask;
        }
        p->dup[i] = (int64_t)r + 1;
        relevant |= row->gid >= 0;
    }
    if (query < 0)
        return 1;
    long long depth = (long long)n;
    if (p->max_docs >= 0 && depth > p->max_docs)
        depth = p->max_docs;
    p->retrieved[query] = depth;
    if (p->full)
        return rank_block(p, query, (size_t)depth);
    if (!relevant)
        return 1;
    Row *rows = p->rows;
    trec_sort(rows, n, 0);
    for (size_t r = 0; r < n; r++) {
        if (rows[r].gid < 0)
            continue;
        if (p->max_docs >= 0 && (long long)(r + 1) > p->max_docs)
            continue;
        if (!grow((void **)&p->hits, &p->cap_hits, p->n_hits + 1, sizeof(Hit), &p->nomem))
            return 0;
        p->hits[p->n_hits++] = (Hit){rows[r].gid, (int32_t)(r + 1)};
    }
    return 1;
}

/* 1: the file read; 0: declined (or memory ran out: p->nomem) */
static int run_pass(Pass *p, const unsigned char *s, size_t n)
{
    if (n >= 3 && s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf)
        s += 3, n -= 3;
    p->data = s;
    if (!valid_text(s, n))
        return 0;
    const unsigned char *end = s + n, *at = s;
    const unsigned char *qid = NULL;
    size_t qlen = 0;
    int64_t query = -1;
    size_t lines = 0;
    while (at < end) {
        const unsigned char *field[5];
        size_t len[5];
        int count = 0;
        for (;;) {
            while (at < end && byte_class[*at] == 1)
                at++;
            if (at == end || byte_class[*at] == 2)
                break;
            const unsigned char *start = at;
            while (at < end && byte_class[*at] == 0)
                at++;
            if (count == 0 && *start == '#')
                break;
            field[count] = start;
            len[count] = (size_t)(at - start);
            if (++count == 5)
                break;
        }
        /* to the next line */
        while (at < end && byte_class[*at] != 2)
            at++;
        if (at < end)
            at++; /* a \r\n is a \r and a blank line */
        if (count == 0)
            continue; /* blank or comment */
        if (count < 5)
            return 0;
        lines++;
        if (qid == NULL || len[0] != qlen || memcmp(qid, field[0], qlen) != 0) {
            if (!end_block(p, query))
                return 0;
            p->n_rows = 0;
            qid = field[0];
            qlen = len[0];
            if (seen_before(p, qid, qlen))
                return 0;
            query = find_query(p->rel, qid, qlen, hash_bytes(qid, qlen));
        }
        double score;
        if (!parse_score(field[4], len[4], &score))
            return 0;
        if (!grow((void **)&p->rows, &p->cap_rows, p->n_rows + 1, sizeof(Row), &p->nomem))
            return 0;
        uint64_t h = hash_bytes(field[2], len[2]);
        int64_t gid = query < 0 ? -1 : find_doc(p->rel, query, field[2], len[2], h);
        p->rows[p->n_rows++] = (Row){score, field[2], len[2], h, gid};
    }
    if (lines == 0)
        return 0;
    return end_block(p, query);
}

static int by_query(const void *pa, const void *pb)
{
    const Block *a = pa, *b = pb;
    return a->query < b->query ? -1 : a->query > b->query;
}

/* The pass over ``view`` (``full``: ranking mode): 1 the file read, 0 declined (or
 * memory ran out: p->nomem); the hits (by document) or blocks (by query) in order. */
static int read_file(Pass *p, const Py_buffer *view, const RelevantObject *rel,
                     long long max_docs, int full)
{
    memset(p, 0, sizeof(*p));
    const struct lconv *conv = localeconv();
    if (conv == NULL || strcmp(conv->decimal_point, ".") != 0)
        return 0; /* strtod would read numbers in another locale */
    p->rel = rel;
    p->max_docs = max_docs;
    p->full = full;
    p->retrieved = calloc((size_t)rel->n_queries + 1, sizeof(int64_t));
    if (p->retrieved == NULL) {
        p->nomem = 1;
        return 0;
    }
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = run_pass(p, (const unsigned char *)view->buf, (size_t)view->len);
    if (ok && p->n_hits > 1)
        qsort(p->hits, p->n_hits, sizeof(Hit), by_gid);
    if (ok && p->n_blocks > 1)
        qsort(p->blocks, p->n_blocks, sizeof(Block), by_query);
    Py_END_ALLOW_THREADS
    return ok;
}

static void free_pass(Pass *p)
{
    free(p->rows);
    free(p->dup);
    free(p->hits);
    free(p->retrieved);
    free(p->seen);
    free(p->seen_slots);
    free(p->out);
    free(p->blocks);
}

static PyObject *positions(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    PyObject *rel_obj;
    long long max_docs;
    if (!PyArg_ParseTuple(args, "y*O!L", &view, &RelevantType, &rel_obj, &max_docs))
        return NULL;
    RelevantObject *rel = (RelevantObject *)rel_obj;
    Pass p;
    int ok = read_file(&p, &view, rel, max_docs, 0);
    PyObject *result = NULL;
    if (p.nomem)
        PyErr_NoMemory();
    else if (!ok)
        result = Py_NewRef(Py_None);
    else {
        PyObject *doc = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(p.n_hits * 8));
        PyObject *rank = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(p.n_hits * 4));
        PyObject *depth = PyBytes_FromStringAndSize((const char *)p.retrieved,
                                                    (Py_ssize_t)(rel->n_queries * 8));
        if (doc && rank && depth) {
            int64_t *d = (int64_t *)PyBytes_AS_STRING(doc);
            int32_t *r = (int32_t *)PyBytes_AS_STRING(rank);
            for (size_t i = 0; i < p.n_hits; i++) {
                d[i] = p.hits[i].gid;
                r[i] = p.hits[i].rank;
            }
            result = PyTuple_Pack(3, doc, rank, depth);
        }
        Py_XDECREF(doc);
        Py_XDECREF(rank);
        Py_XDECREF(depth);
    }
    free_pass(&p);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *ranking(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    PyObject *rel_obj;
    long long max_docs;
    if (!PyArg_ParseTuple(args, "y*O!L", &view, &RelevantType, &rel_obj, &max_docs))
        return NULL;
    Pass p;
    int ok = read_file(&p, &view, (RelevantObject *)rel_obj, max_docs, 1);
    PyObject *result = NULL;
    if (p.nomem)
        PyErr_NoMemory();
    else if (!ok)
        result = Py_NewRef(Py_None);
    else {
        size_t chars = 0;
        for (size_t i = 0; i < p.n_out; i++)
            chars += p.out[i].len;
        Py_ssize_t n = (Py_ssize_t)p.n_out;
        PyObject *q = PyBytes_FromStringAndSize(NULL, n * 8);
        PyObject *score = PyBytes_FromStringAndSize(NULL, n * 8);
        PyObject *offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 8);
        PyObject *docs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)chars);
        if (q && score && offsets && docs) {
            int64_t *qs = (int64_t *)PyBytes_AS_STRING(q);
            double *ss = (double *)PyBytes_AS_STRING(score);
            int64_t *os = (int64_t *)PyBytes_AS_STRING(offsets);
            char *ds = PyBytes_AS_STRING(docs);
            size_t row = 0, at = 0;
            os[0] = 0;
            for (size_t b = 0; b < p.n_blocks; b++) {
                const Block *block = &p.blocks[b];
                for (size_t i = 0; i < block->count; i++, row++) {
                    const Row *r = &p.out[block->start + i];
                    qs[row] = block->query;
                    ss[row] = r->score;
                    memcpy(ds + at, r->doc, r->len);
                    at += r->len;
                    os[row + 1] = (int64_t)at;
                }
            }
            result = PyTuple_Pack(4, q, score, offsets, docs);
        }
        Py_XDECREF(q);
        Py_XDECREF(score);
        Py_XDECREF(offsets);
        Py_XDECREF(docs);
    }
    free_pass(&p);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"positions", positions, METH_VARARGS,
     "positions(data, relevant, max_docs) -> (doc, rank, retrieved) or None\n\n"
     "The text of a TREC run file in one pass: the global numbers (int64) and ranks\n"
     "(int32) of the relevant documents it retrieved, by document, and each query's\n"
     "depth (int64), as bytes; max_docs < 0: no cut.  None: the pass declines the file."},
    {"ranking", ranking, METH_VARARGS,
     "ranking(data, queries, max_docs) -> (q, score, offsets, docnos) or None\n\n"
     "The text of a TREC run file in one pass: every row of the queries of ``queries``\n"
     "(a Relevant, its documents unused) grouped by query index, in trec order within\n"
     "each, cut at max_docs (< 0: no cut), as bytes: query indices (int64), scores\n"
     "(float64), docno offsets (int64, one more than rows) and the docnos' UTF-8 bytes.\n"
     "None: the pass declines the file."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_textpass",
    "One pass over a TREC run file's text (see prefeval.io.textpass).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__textpass(void)
{
    init_classes();
    if (PyType_Ready(&RelevantType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Py_INCREF(&RelevantType);
    if (PyModule_AddObject(m, "Relevant", (PyObject *)&RelevantType) < 0) {
        Py_DECREF(&RelevantType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
