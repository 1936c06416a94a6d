/* The gather study's host map generator (glibc rand() reproduced). */
#ifndef L2P_SEEDMAP_H
#define L2P_SEEDMAP_H

#include <stddef.h>
#include <stdint.h>

#include "l2p_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The study's map: srand(0); map[i] = rand() % range, with glibc's rand() (the additive
 * feedback generator of random_r's TYPE_3; glibc treats seed 0 as 1), reproduced exactly on
 * any platform. */
void l2p_seed_map_int32(int32_t *map, size_t n, uint32_t range, unsigned seed);
void l2p_seed_map_int64(int64_t *map, size_t n, uint64_t range, unsigned seed);
/* n >= 0 entries, range in [1, 2^31 - 1] (rand() yields 31 bits). */
l2p_status l2p_seed_map_check(long long n, long long range);


#ifdef __cplusplus
}
#endif
#endif
