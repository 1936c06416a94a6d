#include "l2p_flavour.h"

#include <string.h>

const char *const l2p_load_flavour_names[L2P_LD_COUNT + 1] = {
    "default", "ca", "cg", "cs", "lu", "cv", "nc", "evict_first", "evict_last", "evict_normal",
    NULL};
const char *const l2p_store_flavour_names[L2P_ST_COUNT + 1] = {"wb", "cg", "cs", "wt", NULL};
#define load_names l2p_load_flavour_names
#define store_names l2p_store_flavour_names

const char *l2p_load_flavour_name(int f)
{
    return f >= 0 && f < L2P_LD_COUNT ? load_names[f] : NULL;
}

const char *l2p_store_flavour_name(int f)
{
    return f >= 0 && f < L2P_ST_COUNT ? store_names[f] : NULL;
}

l2p_status l2p_parse_choice(const char *name, const char *arg, const char *const *names,
                            int *out)
{
    char choices[256] = "";
    for (int i = 0; names[i]; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = i;
            return L2P_OK;
        }
        strncat(choices, i ? ", " : "", sizeof choices - strlen(choices) - 1);
        strncat(choices, names[i], sizeof choices - strlen(choices) - 1);
    }
    return l2p_fail(L2P_ERR_VALUE, "%s: '%s' is not one of %s", arg, name, choices);
}

l2p_status l2p_load_flavour_parse(const char *name, const char *arg, int *out)
{
    return l2p_parse_choice(name, arg, load_names, out);
}

l2p_status l2p_store_flavour_parse(const char *name, const char *arg, int *out)
{
    return l2p_parse_choice(name, arg, store_names, out);
}

l2p_status l2p_check_width(long long width, const char *arg)
{
    if (width == 1 || width == 2 || width == 4 || width == 8 || width == 16) return L2P_OK;
    return l2p_fail(L2P_ERR_VALUE, "%s: %lld bytes is not an access width; allowed 1, 2, 4, 8, 16",
                    arg, width);
}
