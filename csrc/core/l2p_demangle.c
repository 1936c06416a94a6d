/* Kernel names a person can read: demangling and the short form (the rule is the header's). */
#include "l2p_demangle.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* libstdc++'s abi::__cxa_demangle, extern "C" there: declared here because a .c file includes
 * no C++ header. With buf NULL it mallocs the result; status 0 is success. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define ELLIPSIS "\xe2\x80\xa6" /* "…" */
/* Brackets nested deeper than this are taken as unbalanced (rule 5): bounds the scan's stack. */
#define MAX_NEST 128
/* Longer input is not demangled or parsed, only cut: far above any name the project keeps
 * (L2P_KERNEL_NAME_MAX), and it bounds the work a hostile string can ask for. */
#define MAX_INPUT 8192
/* A demangled text longer than this (substitutions expand: a short mangled name can demangle
 * to pages) is read by its mangled name's readable parts instead: the parse stays cheap. */
#define MAX_TEXT (4 * MAX_INPUT)

/* ---- a growing string; after a failed allocation it stays empty and says so ---- */

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} text;

static void put(text *t, const char *p, size_t n)
{
    if (t->oom || n == 0) return;
    if (t->n + n + 1 > t->cap) {
        size_t cap = (t->n + n + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->oom = 1;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
    memcpy(t->s + t->n, p, n);
    t->n += n;
    t->s[t->n] = '\0';
}

static void put_z(text *t, const char *z) { put(t, z, strlen(z)); }

/* Code points in s[0, n): every byte but UTF-8 continuation bytes starts one. */
static size_t chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* The byte length of the first k code points of s[0, n). */
static size_t bytes_of(const char *s, size_t n, size_t k)
{
    size_t i = 0;
    for (size_t c = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80 && c++ == k) break;
    }
    return i;
}

/* s[0, n) into out, at most cap - 1 bytes, cut at a character boundary; the bytes written. */
static size_t copy_out(const char *s, size_t n, char *out, size_t cap)
{
    if (cap == 0) return 0;
    if (n > cap - 1) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* s[n] starts a character */
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return n;
}

/* ---- demangling ---- */

/* Only "_Z..." is a mangled function name: __cxa_demangle also reads a bare "i" or "f" as a
 * type ("int", "float"), which a plain kernel name must never become. */
static int is_mangled(const char *name) { return name[0] == '_' && name[1] == 'Z'; }

/* The demangled name (malloc'd), or NULL where it is not mangled or does not demangle. */
static char *demangle_alloc(const char *name)
{
    int status = -1;
    if (!is_mangled(name) || strlen(name) > MAX_INPUT) return NULL;
    char *s = __cxa_demangle(name, NULL, NULL, &status);
    if (status == 0) return s;
    free(s);
    return NULL;
}

size_t l2p_demangle(const char *mangled, char *out, size_t cap)
{
    char *d = demangle_alloc(mangled);
    const char *s = d ? d : mangled;
    size_t n = strlen(s);
    if (cap) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(out, s, k);
        out[k] = '\0';
    }
    free(d);
    return n;
}

/* The <source-name> at *p ("6native"): *id and *len name its identifier, *p moves past it.
 * Returns 1; 0 where *p holds none; -1 where the name ends inside the identifier (*len is
 * then what is left of it). */
static int source_name(const char **p, const char **id, size_t *len)
{
    const char *q = *p;
    size_t n = 0;
    if (!isdigit((unsigned char)*q)) return 0;
    while (isdigit((unsigned char)*q) && n <= MAX_INPUT) n = n * 10 + (size_t)(*q++ - '0');
    size_t have = strlen(q);
    *id = q;
    *len = n < have ? n : have;
    *p = q + *len;
    return n <= have ? 1 : -1;
}

/* What a mangled name that does not demangle still says: the source names of its (nested)
 * name joined by "::" ("(anonymous namespace)" for _GLOBAL__N...), then "<…>" where template
 * arguments follow, or "…" where the name ends inside an identifier. Appends nothing where
 * the name starts otherwise (an operator, a substitution). */
static void mangled_prefix(text *t, const char *m)
{
    const char *p = m + 2, *id;
    size_t len;
    if (*p == 'L') p++; /* internal linkage */
    int nested = *p == 'N';
    if (nested) {
        p++;
        while (*p == 'r' || *p == 'V' || *p == 'K') p++; /* cv-qualifiers of a member */
        if (*p == 'R' || *p == 'O') p++;                  /* its ref-qualifier */
    }
    for (int first = 1;; first = 0) {
        if (*p == 'L' && isdigit((unsigned char)p[1])) p++; /* a name with internal linkage */
        int std = p[0] == 'S' && p[1] == 't', got = std ? 1 : source_name(&p, &id, &len);
        if (!got) break;
        if (!first) put_z(t, "::");
        if (std) {
            put_z(t, "std");
            p += 2;
        } else if (len >= 10 && strncmp(id, "_GLOBAL__N", 10) == 0) {
            put_z(t, "(anonymous namespace)");
        } else {
            put(t, id, len);
        }
        if (got < 0) {
            put_z(t, ELLIPSIS);
            return;
        }
        while (p[0] == 'B' && isdigit((unsigned char)p[1])) { /* an ABI tag: not shown */
            p++;
            if (source_name(&p, &id, &len) < 0) return;
        }
        if (!nested) break;
    }
    if (*p == 'I') put_z(t, "<" ELLIPSIS ">");
}

/* ---- reading a demangled name: brackets ---- */

static int opens(char c) { return c == '(' || c == '[' || c == '{' || c == '<'; }

static char closer(char c) { return c == '(' ? ')' : c == '[' ? ']' : c == '{' ? '}' : '>'; }

/* The index of the bracket closing the one at s[i], or e where it never closes in [i, e).
 * Angle brackets are brackets only where a template argument list can be (not inside (), []
 * or {}: "(4)>(3)" is an expression, "{lambda(A<B>)#1}" holds a parameter list). */
static size_t closing(const char *s, size_t i, size_t e)
{
    char stack[MAX_NEST];
    size_t depth = 0;
    for (; i < e; i++) {
        char c = s[i];
        int angles = depth == 0 || stack[depth - 1] == '>';
        if ((c == '<' && angles) || (c != '<' && opens(c))) {
            if (depth == MAX_NEST) return e;
            stack[depth++] = closer(c);
        } else if (c == ')' || c == ']' || c == '}' || (c == '>' && angles)) {
            if (depth == 0 || stack[depth - 1] != c) return e;
            if (--depth == 0) return i;
        }
    }
    return e;
}

/* The next top-level position after s[i]: past the bracket group s[i] opens (e where it never
 * closes), else i + 1. */
static size_t step(const char *s, size_t i, size_t e)
{
    if (!opens(s[i])) return i + 1;
    size_t j = closing(s, i, e);
    return j < e ? j + 1 : e;
}

/* Whether every bracket group in s[0, n) closes (a name with "operator<" in it does not). */
static int balanced(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!opens(s[i])) continue;
        if ((i = closing(s, i, n)) == n) return 0;
    }
    return 1;
}

/* The last top-level "::" in s[b, e), or e. */
static size_t last_scope(const char *s, size_t b, size_t e)
{
    size_t at = e;
    for (size_t i = b; i < e;) {
        if (s[i] == ':' && i + 1 < e && s[i + 1] == ':') {
            at = i;
            i += 2;
        } else {
            i = step(s, i, e);
        }
    }
    return at;
}

static void trim(const char *s, size_t *b, size_t *e)
{
    while (*b < *e && s[*b] == ' ') (*b)++;
    while (*e > *b && s[*e - 1] == ' ') (*e)--;
}

/* ---- the short form (rule 3) ---- */

static void put_span(text *t, const char *s, size_t b, size_t e, int level);
static void put_arg(text *t, const char *s, size_t b, size_t e, int level);

/* The items of a list s[b, e) split at top-level commas, each shortened at `level`, joined by
 * ", ". */
static void put_items(text *t, const char *s, size_t b, size_t e, int level)
{
    for (size_t i = b, start = b; i <= e;) {
        if (i == e || s[i] == ',') {
            if (start > b) put_z(t, ", ");
            put_arg(t, s, start, i, level);
            start = ++i;
        } else {
            i = step(s, i, e);
        }
    }
}

/* A lambda "{lambda(P...)#n}" at s[b, e): its parameters' types shortened as arguments of
 * `level`. Any other brace group ("{unnamed type#1}") as it is. */
static void put_braces(text *t, const char *s, size_t b, size_t e, int level)
{
    static const char lambda[] = "{lambda(";
    size_t k = sizeof lambda - 1;
    size_t close = e - b > k && strncmp(s + b, lambda, k) == 0 ? closing(s, b + k - 1, e) : e;
    if (close >= e) {
        put(t, s + b, e - b);
        return;
    }
    put(t, lambda, k);
    if (close > b + k) put_items(t, s, b + k, close, level);
    put(t, s + close, e - close); /* ")#n}" */
}

/* s[b, e) with its template argument lists shortened: the arguments of a list at `level` 1
 * are shortened as arguments of level 2; a list at level 2 or deeper is written "<…>". A
 * bracket that does not close is text. */
static void put_span(text *t, const char *s, size_t b, size_t e, int level)
{
    for (size_t i = b; i < e;) {
        size_t j = opens(s[i]) ? closing(s, i, e) : e;
        if (j == e) {
            put(t, s + i++, 1);
            continue;
        }
        if (s[i] == '<' && j > i + 1) {
            put_z(t, "<");
            if (level >= 2) put_z(t, ELLIPSIS);
            else put_items(t, s, i + 1, j, level + 1);
            put_z(t, ">");
        } else if (s[i] == '{') {
            put_braces(t, s, i, j + 1, level);
        } else {
            put(t, s + i, j + 1 - i);
        }
        i = j + 1;
    }
}

/* The function a lambda's scope s[b, e) is in: the name (template arguments as "<…>") of the
 * first "::"-separated part with a parameter list ("direct_copy_kernel_cuda" of "at::native::
 * direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const"), then
 * "::"; nothing without one. */
static void put_enclosing(text *t, const char *s, size_t b, size_t e, int level)
{
    for (size_t i = b, part = b; i < e;) {
        if (s[i] == ':' && i + 1 < e && s[i + 1] == ':') {
            part = (i += 2);
        } else if (s[i] == '(' && i > part) {
            put_span(t, s, part, i, level + 1); /* its own template arguments are "…" */
            put_z(t, "::");
            return;
        } else {
            i = step(s, i, e);
        }
    }
}

/* One template argument s[b, e) at `level`: only what follows its last top-level "::" (a
 * lambda or unnamed type keeps its enclosing function), lists shortened by put_span. */
static void put_arg(text *t, const char *s, size_t b, size_t e, int level)
{
    trim(s, &b, &e);
    size_t q = last_scope(s, b, e);
    if (q < e) {
        if (q + 2 < e && s[q + 2] == '{') put_enclosing(t, s, b, q, level);
        b = q + 2;
    }
    put_span(t, s, b, e, level);
}

/* ---- the kernel's own name (rules 2 and 4) ---- */

/* Where the name ends: at its parameter list, the first top-level "(...)" after the name's
 * start that is not followed by "::" ("(anonymous namespace)::" is part of the name); n where
 * there is none (a plain name: "(other kernels)" is no parameter list). */
static size_t name_end(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t next = step(s, i, n);
        if (s[i] == '(' && i > 0 && s[i - 1] != ' ' && strncmp(s + next, "::", 2) != 0)
            return i;
        i = next;
    }
    return n;
}

/* Where the name starts: after the return type, at the last top-level space before `end`.
 * Only a function's signature (end < n: a parameter list follows) has a return type: a plain
 * name with a space ("cudaMemcpy D2D") is all name. */
static size_t name_start(const char *s, size_t end, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; end < n && i < end; i = step(s, i, end))
        if (s[i] == ' ') start = i + 1;
    return start;
}

/* The last top-level '<' of s[b, e) whose list closes inside it, or e. */
static size_t last_list(const char *s, size_t b, size_t e)
{
    size_t at = e;
    for (size_t i = b; i < e; i = step(s, i, e))
        if (s[i] == '<' && closing(s, i, e) < e) at = i;
    return at;
}

/* Rule 4: prefix "<" arguments ">" suffix, the arguments (each NUL-ended in `args`, `nargs`
 * of them) written while the whole fits `max` characters, then one "…". */
static void put_budgeted(text *t, const text *prefix, const text *args, size_t nargs,
                         const text *suffix, size_t max)
{
    size_t used = chars(prefix->s, prefix->n) + 1, tail = 1 + chars(suffix->s, suffix->n);
    put(t, prefix->s, prefix->n);
    put_z(t, "<");
    const char *a = args->s;
    for (size_t i = 0; i < nargs; i++, a += strlen(a) + 1) {
        size_t sep = i ? 2 : 0, w = chars(a, strlen(a)), more = i + 1 < nargs ? 3 : 0;
        if (max && used + sep + w + more + tail > max) {
            put_z(t, i ? ", " ELLIPSIS : ELLIPSIS);
            break;
        }
        put_z(t, i ? ", " : "");
        put_z(t, a);
        used += sep + w;
    }
    put_z(t, ">");
    put(t, suffix->s, suffix->n);
}

/* Rules 2 to 4 on a demangled (or readable) name s[0, n) whose brackets balance. */
static void shorten(text *t, const char *s, size_t n, size_t max)
{
    size_t e = name_end(s, n), b = name_start(s, e, n);
    trim(s, &b, &e);
    size_t lt = last_list(s, b, e);
    if (lt == e) {
        put_span(t, s, b, e, 1);
        return;
    }
    size_t gt = closing(s, lt, e);
    text prefix = {0}, args = {0}, suffix = {0};
    put_span(&prefix, s, b, lt, 1);
    put_span(&suffix, s, gt + 1, e, 1);
    size_t nargs = 0;
    for (size_t i = lt + 1, start = lt + 1; i <= gt;) {
        if (i == gt || s[i] == ',') {
            put_arg(&args, s, start, i, 1);
            put(&args, "", 1); /* each argument NUL-ended */
            nargs++;
            start = ++i;
        } else {
            i = step(s, i, gt);
        }
    }
    t->oom |= prefix.oom | args.oom | suffix.oom;
    if (!t->oom) put_budgeted(t, &prefix, &args, nargs, &suffix, max);
    free(prefix.s);
    free(args.s);
    free(suffix.s);
}

/* Rule 5: s[0, n) cut to max - 1 characters and "…" where longer than max (0: no limit). */
static size_t put_cut(char *out, size_t cap, const char *s, size_t n, size_t max)
{
    if (!max || chars(s, n) <= max) return copy_out(s, n, out, cap);
    text t = {0};
    put(&t, s, bytes_of(s, n, max - 1));
    put_z(&t, ELLIPSIS);
    size_t w = t.oom ? copy_out(s, bytes_of(s, n, max), out, cap) : copy_out(t.s, t.n, out, cap);
    free(t.s);
    return w;
}

size_t l2p_kernel_short(const char *name, char *out, size_t cap, size_t max_chars)
{
    size_t n = strlen(name);
    if (n > MAX_INPUT) return put_cut(out, cap, name, n, max_chars);
    char *d = demangle_alloc(name);
    if (d && strlen(d) > MAX_TEXT) {
        free(d);
        d = NULL;
    }
    text readable = {0}, t = {0};
    if (!d && is_mangled(name)) mangled_prefix(&readable, name);
    const char *s = d ? d : readable.n ? readable.s : name;
    n = strlen(s);
    if (balanced(s, n)) shorten(&t, s, n, max_chars);
    size_t w = t.n && !t.oom ? put_cut(out, cap, t.s, t.n, max_chars)
                             : put_cut(out, cap, s, n, max_chars);
    free(t.s);
    free(readable.s);
    free(d);
    return w;
}
