/* Cache-operator "flavours" of loads and stores, and the names users give them.
 * Loads: default (ld.global), ca, cg, cs, lu, cv (cache operators), nc (ld.global.nc, the
 * read-only path of __ldg), and the L2 eviction hints evict_first / evict_last / evict_normal
 * (createpolicy + ld.global.L2::cache_hint, cc >= 8.0). Stores: wb, cg, cs, wt. */
#ifndef L2P_FLAVOUR_H
#define L2P_FLAVOUR_H

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    L2P_LD_DEFAULT = 0, L2P_LD_CA, L2P_LD_CG, L2P_LD_CS, L2P_LD_LU, L2P_LD_CV, L2P_LD_NC,
    L2P_LD_EVICT_FIRST, L2P_LD_EVICT_LAST, L2P_LD_EVICT_NORMAL, L2P_LD_COUNT
} l2p_load_flavour;

typedef enum { L2P_ST_WB = 0, L2P_ST_CG, L2P_ST_CS, L2P_ST_WT, L2P_ST_COUNT } l2p_store_flavour;

/* The names, in enum order, NULL-terminated. */
extern const char *const l2p_load_flavour_names[L2P_LD_COUNT + 1];
extern const char *const l2p_store_flavour_names[L2P_ST_COUNT + 1];

const char *l2p_load_flavour_name(int flavour);
const char *l2p_store_flavour_name(int flavour);
/* The one choice parser of the core and the extension: the index of `name` in the
 * NULL-terminated `names`; an unknown name is an error naming the
 * argument `arg` and listing the choices. */
l2p_status l2p_parse_choice(const char *name, const char *arg, const char *const *names,
                            int *out);
/* Parse a name; an unknown one is an error naming the argument and listing the choices. */
l2p_status l2p_load_flavour_parse(const char *name, const char *arg, int *out);
l2p_status l2p_store_flavour_parse(const char *name, const char *arg, int *out);
/* Access widths the kernels support: 1, 2, 4, 8, 16 bytes. */
l2p_status l2p_check_width(long long width, const char *arg);

#ifdef __cplusplus
}
#endif
#endif
