/* Kernel names a person can read (l2p_demangle.h): real mangled names demangled, shortened by
 * the header's rule, cut names (the project keeps L2P_KERNEL_NAME_MAX - 1 characters) shown by
 * what they still say, budgets and buffer sizes always kept.
 *
 * Besides PyTorch's fill kernel, the names are the device symbols of objects built here with
 * `nvcc -cubin -arch=sm_90 k.cu` and listed with `readelf -sW k.cubin` (nm lists the host
 * stubs, whose internal-linkage copies carry an extra 'L'). k.cu:
 *     namespace lib { namespace detail {
 *     template <typename T> struct Half { T v; };
 *     template <typename T, int N> struct Array { T d[N]; };
 *     template <typename T> struct Sum { __device__ T operator()(T a, T b) const; }; }
 *     template <int VEC, typename F, typename A> __global__ void vectorized_kernel(int, F, A) {}
 *     template <typename T, typename Op> __global__ void reduce_kernel(const T *, T *, Op) {}
 *     namespace { __global__ void hidden_kernel(float *p) {} } }
 *     extern "C" __global__ void plain_c_kernel(float *p) {}
 *     __global__ void overloaded(float *p, unsigned long n) {}
 *     + explicit instantiations <4, Sum<Half<float>>, Array<char*, 2>> and <double, Sum<double>>
 * and a flashinfer-like kernel templated on nested traits (269 characters mangled), and
 * PyTorch's copy kernel whose functor is a lambda. */
#include <stdint.h>
#include <string.h>

#include "l2p_demangle.h"
#include "l2p_graphscan.h" /* L2P_KERNEL_NAME_MAX */
#include "l2p_test.h"

int l2p_test_passed, l2p_test_failed;

static const char FILL[] = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfE"
                           "ENS_6detail5ArrayIPcLi1EEEEEviT0_T1_";
static const char COPY[] =
    "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_23direct_copy_kernel_cudaERNS_18"
    "TensorIteratorBaseEENKUlvE1_clEvENKUlvE8_clEvEUlN3c104HalfEE_NS_6detail5ArrayIPcLi2EEEEEv"
    "iT0_T1_";
/* PyTorch's index kernel (a stored advise result from an H200): a lambda in a template. */
static const char INDEX[] =
    "_ZN2at6native24index_elementwise_kernelILi128ELi4EZNS0_16gpu_index_kernelIZNS0_17index_ke"
    "rnel_implINS0_10OpaqueTypeILi2EEEEEvRNS_18TensorIteratorBaseEN3c108ArrayRefIlEESA_EUlPcPK"
    "clE_EEvS7_SA_SA_RKT_bEUliE_EEvlT1_";
static const char VEC[] = "_ZN3lib17vectorized_kernelILi4ENS_6detail3SumINS1_4HalfIfEEEENS1_5Arr"
                          "ayIPcLi2EEEEEviT0_T1_";
static const char REDUCE[] = "_ZN3lib13reduce_kernelIdNS_6detail3SumIdEEEEvPKT_PS4_T0_";
static const char HIDDEN[] = "_ZN3lib36_GLOBAL__N__932ef5e0_4_k_cu_32df9e9713hidden_kernelEPf";
static const char LONG[] =
    "_ZN10flashinfer9attention47BatchPrefillWithPagedKVCacheWithPageTableKernelINS0_6detail12"
    "KernelTraitsINS2_9TileShapeILi128EEENS3_IfNS4_ILi64EEEEEEENS2_56DefaultAttentionVariantWit"
    "hLogitsSoftCapAndSlidingWindowENS2_25PagedKVCacheWithPageTableINS3_IfdEEEELb1ELi128EEEvT1_f";

#define ELL "\xe2\x80\xa6" /* "…" */

/* The short form of name with a budget, in a buffer that always holds it. */
static const char *short_of(const char *name, size_t max)
{
    static char out[4096];
    l2p_kernel_short(name, out, sizeof out, max);
    return out;
}

/* The first `keep` characters of name, the way the project cuts a kernel name. */
static void cut_to(char *dst, const char *name, size_t keep)
{
    memcpy(dst, name, keep);
    dst[keep] = '\0';
}

static size_t code_points(const char *s)
{
    size_t c = 0;
    for (; *s; s++) c += ((unsigned char)*s & 0xC0) != 0x80;
    return c;
}

static void test_demangle(void)
{
    char out[512];
    const char *fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor"
                       "<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>"
                       ", at::detail::Array<char*, 1>)";
    CHECK(l2p_demangle(FILL, out, sizeof out) == strlen(fill) && strcmp(out, fill) == 0);
    l2p_demangle(HIDDEN, out, sizeof out);
    CHECK(strcmp(out, "lib::(anonymous namespace)::hidden_kernel(float*)") == 0);
    l2p_demangle("_Z10overloadedPfm", out, sizeof out);
    CHECK(strcmp(out, "overloaded(float*, unsigned long)") == 0);
    /* not mangled: as given ("i" and "f" would demangle as types) */
    CHECK(l2p_demangle("plain_c_kernel", out, sizeof out) == 14 && !strcmp(out, "plain_c_kernel"));
    CHECK(l2p_demangle("i", out, sizeof out) == 1 && strcmp(out, "i") == 0);
    CHECK(l2p_demangle("", out, sizeof out) == 0 && out[0] == '\0');
    /* a cut name does not demangle: as given */
    char cut[L2P_KERNEL_NAME_MAX];
    cut_to(cut, LONG, L2P_KERNEL_NAME_MAX - 1);
    CHECK(strlen(cut) == L2P_KERNEL_NAME_MAX - 1 && strlen(LONG) > strlen(cut));
    CHECK(l2p_demangle(cut, out, sizeof out) == strlen(cut) && strcmp(out, cut) == 0);
    /* snprintf's contract: the whole length back, at most cap - 1 bytes written */
    char small[8] = "xxxxxxx";
    CHECK(l2p_demangle(FILL, small, sizeof small) == strlen(fill));
    CHECK(strcmp(small, "void at") == 0);
    CHECK(l2p_demangle(FILL, small, 0) == strlen(fill) && small[0] == 'v');
}

static void test_short_rule(void)
{
    /* rules 2-4: no return type or parameters, the arguments unqualified, then "…" */
    CHECK(!strcmp(short_of(FILL, 72),
                  "at::native::vectorized_elementwise_kernel<4, FillFunctor<float>, " ELL ">"));
    CHECK(!strcmp(short_of(FILL, 0),
                  "at::native::vectorized_elementwise_kernel<4, FillFunctor<float>, Array<char*, "
                  "1>>"));
    CHECK(!strcmp(short_of(FILL, 60), "at::native::vectorized_elementwise_kernel<4, " ELL ">"));
    CHECK(!strcmp(short_of(FILL, 44), "at::native::vectorized_elementwise_kernel<" ELL ">"));
    /* rule 5: not even name<…> fits */
    CHECK(!strcmp(short_of(FILL, 20), "at::native::vectori" ELL));
    /* rule 3: nested two deep is "…"; the anonymous namespace of the kernel's name kept */
    CHECK(!strcmp(short_of(VEC, 0), "lib::vectorized_kernel<4, Sum<Half<" ELL ">>, Array<char*, 2>>"));
    CHECK(!strcmp(short_of(REDUCE, 0), "lib::reduce_kernel<double, Sum<double>>"));
    CHECK(!strcmp(short_of(HIDDEN, 0), "lib::(anonymous namespace)::hidden_kernel"));
    CHECK(!strcmp(short_of("_Z10overloadedPfm", 0), "overloaded"));
    /* a lambda keeps its enclosing function and its (unqualified) parameter types */
    CHECK(!strcmp(short_of(COPY, 100), "at::native::vectorized_elementwise_kernel<4, "
                                       "direct_copy_kernel_cuda::{lambda(Half)#1}, " ELL ">"));
    CHECK(!strcmp(short_of(INDEX, 0), "at::native::index_elementwise_kernel<128, 4, "
                                      "gpu_index_kernel<" ELL ">::{lambda(int)#1}>"));
    CHECK(!strcmp(short_of(LONG, 0),
                  "flashinfer::attention::BatchPrefillWithPagedKVCacheWithPageTableKernel<"
                  "KernelTraits<TileShape<" ELL ">, KernelTraits<" ELL ">>, "
                  "DefaultAttentionVariantWithLogitsSoftCapAndSlidingWindow, "
                  "PagedKVCacheWithPageTable<KernelTraits<" ELL ">>, true, 128>"));
    /* a demangled name reads the same as its mangled one; plain names stay */
    char full[1024];
    l2p_demangle(REDUCE, full, sizeof full);
    CHECK(!strcmp(short_of(full, 0), "lib::reduce_kernel<double, Sum<double>>"));
    CHECK(!strcmp(short_of("plain_c_kernel", 72), "plain_c_kernel"));
    CHECK(!strcmp(short_of("i", 72), "i"));
    CHECK(!strcmp(short_of("", 72), ""));
    /* no parameter list, no return type: names the package makes up stay whole */
    CHECK(!strcmp(short_of("(other kernels)", 72), "(other kernels)"));
    CHECK(!strcmp(short_of("cudaMemcpy D2D", 72), "cudaMemcpy D2D"));
    /* brackets that do not balance: cut as text (rule 5), never read past the name */
    CHECK(!strcmp(short_of("bool operator< <int>(int)", 0), "bool operator< <int>(int)"));
    CHECK(!strcmp(short_of("kernel<<<oops", 8), "kernel<" ELL));
}

static void test_cut_names(void)
{
    /* the project's cut: L2P_KERNEL_NAME_MAX - 1 characters; the qualified name still reads */
    char cut[L2P_KERNEL_NAME_MAX];
    cut_to(cut, LONG, L2P_KERNEL_NAME_MAX - 1);
    CHECK(!strcmp(short_of(cut, 100),
                  "flashinfer::attention::BatchPrefillWithPagedKVCacheWithPageTableKernel<" ELL ">"));
    char fill[60];
    cut_to(fill, FILL, sizeof fill - 1); /* cut inside the template arguments */
    CHECK(!strcmp(short_of(fill, 72), "at::native::vectorized_elementwise_kernel<" ELL ">"));
    CHECK(!strcmp(short_of("_ZN2at6native29vectorized_ele", 72), "at::native::vectorized_ele" ELL));
    CHECK(!strcmp(short_of("_ZN12_GLOBAL__N_16kernelIfE", 72),
                  "(anonymous namespace)::kernel<" ELL ">"));
    CHECK(!strcmp(short_of("_ZNSt6vectorIiSaIiE", 72), "std::vector<" ELL ">"));
    /* nothing readable: the raw name, cut */
    CHECK(!strcmp(short_of("_Zq", 72), "_Zq"));
}

/* Every budget is kept, every buffer size too, and never by splitting a character. */
static void test_budgets_and_buffers(void)
{
    const char *names[] = {FILL, COPY, INDEX, VEC, REDUCE, HIDDEN, LONG, "plain_c_kernel"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        for (size_t max = 1; max <= 300; max++) {
            const char *s = short_of(names[k], max);
            CHECK(code_points(s) <= max);
            CHECK(strcmp(s, short_of(names[k], max)) == 0); /* deterministic */
        }
        char whole[4096], part[16];
        size_t n = l2p_kernel_short(names[k], whole, sizeof whole, 0);
        for (size_t cap = 1; cap <= sizeof part; cap++) {
            size_t w = l2p_kernel_short(names[k], part, cap, 0);
            CHECK(w < cap && part[w] == '\0' && strncmp(part, whole, w) == 0);
            CHECK(w == n || ((unsigned char)whole[w] & 0xC0) != 0x80); /* a whole character */
        }
    }
    char one = 'x';
    CHECK(l2p_kernel_short(FILL, &one, 0, 72) == 0 && one == 'x');
}

int main(void)
{
    test_demangle();
    test_short_rule();
    test_cut_names();
    test_budgets_and_buffers();
    printf("test_demangle: %d passed, %d failed\n", l2p_test_passed, l2p_test_failed);
    return l2p_test_failed != 0;
}
