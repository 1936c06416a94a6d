/* Kernel names a person can read. The driver, CUPTI and graph scans name kernels by their
 * mangled (Itanium C++ ABI) symbols, "_ZN2at6native29vectorized_elementwise_kernelILi4E...";
 * those stay the keys everywhere (signatures, matching, dictionaries). What a person reads
 * (the advise summary, the report, messages) is made here from them, and nowhere else.
 *
 * The short form, the rule (deterministic: the same name and budget give the same text):
 *   1. A mangled name ("_Z...") is demangled with libstdc++'s __cxa_demangle. One that does
 *      not demangle (the project keeps L2P_KERNEL_NAME_MAX - 1 characters of a name, and a
 *      cut name never demangles) shows what can still be read: the source names of its
 *      qualified name, "at::native::vectorized_elementwise_kernel<…>", an identifier cut
 *      short ending in "…". Any other name (extern "C" kernels) is taken as it is.
 *   2. The return type ("void ") and the parameter list (with anything after it: " const",
 *      " [clone .kd]") are dropped.
 *   3. The kernel keeps its namespaces; each template argument loses its own
 *      ("at::native::FillFunctor<float>" -> "FillFunctor<float>"). A lambda argument keeps
 *      its enclosing function, its parameters' types (unqualified) and its number:
 *      "direct_copy_kernel_cuda::{lambda(Half)#1}". Template arguments nested two deep are
 *      written "…": kernel<Sum<Half<float>>> -> "kernel<Sum<Half<…>>>".
 *   4. The kernel's own template arguments are written in order while the whole name fits
 *      max_chars; the first that does not fit, and every one after it, become one "…":
 *      "at::native::vectorized_elementwise_kernel<4, FillFunctor<float>, …>".
 *   5. A name that still does not fit (even "name<…>" is too long), or whose brackets do not
 *      balance, is cut to max_chars - 1 characters followed by "…".
 * Characters are counted as code points ("…" is one character, three UTF-8 bytes). */
#ifndef L2P_DEMANGLE_H
#define L2P_DEMANGLE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The budget of a short name where the caller has no layout of its own: wide enough for
 * "at::native::vectorized_elementwise_kernel<4, FillFunctor<float>, …>". */
#define L2P_KERNEL_SHORT_CHARS 72

/* The demangled form of `mangled`, or the name as given where it is not a mangled name
 * ("_Z...") or does not demangle (a cut name). Like snprintf: writes at most cap - 1 bytes
 * and a NUL (nothing when cap is 0), and returns the length of the whole text, so a return
 * >= cap says "give a buffer of return + 1 bytes". */
size_t l2p_demangle(const char *mangled, char *out, size_t cap);

/* The short form of a kernel name (mangled, demangled, cut or plain) by the rule above, at
 * most max_chars characters (0: no limit). Writes at most cap - 1 bytes, never splitting a
 * character, and a NUL; returns the bytes written. A cap of 3 * max_chars + 1 always holds
 * it when the name is ASCII (every mangled name is), 4 * max_chars + 1 any name. */
size_t l2p_kernel_short(const char *name, char *out, size_t cap, size_t max_chars);

#ifdef __cplusplus
}
#endif

#endif
