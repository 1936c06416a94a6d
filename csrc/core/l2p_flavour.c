#include "l2p_flavour.h"

#include <string.h>

static const char *const load_names[L2P_LD_COUNT] = {
    "default", "ca", "cg", "cs", "lu", "cv", "nc", "evict_first", "evict_last", "evict_normal"};
static const char *const store_names[L2P_ST_COUNT] = {"wb", "cg", "cs", "wt"};

const char *l2p_load_flavour_name(int f)
{
    return f >= 0 && f < L2P_LD_COUNT ? load_names[f] : NULL;
}

const char *l2p_store_flavour_name(int f)
{
    return f >= 0 && f < L2P_ST_COUNT ? store_names[f] : NULL;
}

static l2p_status parse(const char *name, const char *arg, const char *const *names, int n,
                        int *out)
{
    char choices[256] = "";
    for (int i = 0; i < n; i++) {
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
    return parse(name, arg, load_names, L2P_LD_COUNT, out);
}

l2p_status l2p_store_flavour_parse(const char *name, const char *arg, int *out)
{
    return parse(name, arg, store_names, L2P_ST_COUNT, out);
}

l2p_status l2p_check_width(long long width, const char *arg)
{
    if (width == 1 || width == 2 || width == 4 || width == 8 || width == 16) return L2P_OK;
    return l2p_fail(L2P_ERR_VALUE, "%s: %lld bytes is not an access width; allowed 1, 2, 4, 8, 16",
                    arg, width);
}
