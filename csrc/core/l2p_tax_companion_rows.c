/* Companion-stream rows of the set-aside tax model (l2p_tax.h), written by tools/tax-fit from
 * a sweep of `tools/tax-sweep --companion`; do not edit by hand (run the tool again).
 * No sweep has been applied: the companion term is off (D = a = 0) until one is. */
#include "l2p_tax.h"

const l2p_tax_companion_row l2p_tax_companion_table[] = {
    {NULL},
};

const l2p_tax_stream_row l2p_tax_stream_table[] = {
    {NULL},
};
