/* Companion-stream rows of the set-aside tax model (l2p_tax.h), written by tools/investigations/tax-fit from
 * a sweep of `tools/investigations/tax-sweep --companion`; do not edit by hand (run the tool again).
 * - docs/data/tax-companion-H200.json (NVIDIA H200, 2026-11-24, l2persist 6ad06ec5644d+dirty, CUDA 13.0) */
#include "l2p_tax.h"

#define SRC0 "docs/data/tax-companion-H200.json (NVIDIA H200, 2026-11-24, l2persist 6ad06ec5644d+dirty, CUDA 13.0)"

const l2p_tax_companion_row l2p_tax_companion_table[] = {
    {"H200", 9, 0, 60, 15, 1, 38, 40, 40, 42, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 15, 2, 30, 32, 40, 42, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 15, 3, 30, 32, 40, 42, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 15, 4, 32, 34, 40, 42, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 15, 6, 64, 0, 40, 42, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 15, 8, 64, 0, 40, 42, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 18.75, 1, 30, 32, 32, 34, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 18.75, 2, 26, 28, 32, 34, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 18.75, 3, 26, 28, 32, 34, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 18.75, 4, 24, 26, 32, 34, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 18.75, 6, 22, 24, 32, 34, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 18.75, 8, 26, 28, 32, 34, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 22.5, 1, 26, 28, 28, 30, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 22.5, 2, 24, 26, 28, 30, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 22.5, 3, 22, 24, 28, 30, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 22.5, 4, 20, 22, 28, 30, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 22.5, 6, 20, 22, 28, 30, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 22.5, 8, 20, 22, 28, 30, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 26.25, 1, 22, 24, 22, 24, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 26.25, 2, 20, 22, 22, 24, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 26.25, 3, 20, 22, 22, 24, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 26.25, 4, 18, 20, 22, 24, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 26.25, 6, 14, 16, 22, 24, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 26.25, 8, 14, 16, 22, 24, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 30, 1, 16, 18, 18, 20, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 30, 2, 14, 16, 18, 20, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 30, 3, 14, 16, 18, 20, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 30, 4, 12, 14, 18, 20, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 30, 6, 12, 14, 18, 20, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 30, 8, 12, 14, 18, 20, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 33.75, 1, 12, 14, 12, 14, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 33.75, 2, 6, 8, 12, 14, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 33.75, 3, 6, 8, 12, 14, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 33.75, 4, 6, 8, 12, 14, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 33.75, 6, 6, 8, 12, 14, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 33.75, 8, 6, 8, 12, 14, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 37.5, 1, 6, 8, 6, 8, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 37.5, 2, 4, 6, 6, 8, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 37.5, 3, 4, 6, 6, 8, 0, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 37.5, 4, 4, 6, 6, 8, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 37.5, 6, 2, 4, 6, 8, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 37.5, 8, 2, 4, 6, 8, 1, SRC0, L2P_TAX_SHAPE_RANDOM},
    {NULL},
};

const l2p_tax_stream_row l2p_tax_stream_table[] = {
    {"H200", 9, 0, 60, 1, 1.204599, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 2, 1.217014, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 3, 1.252251, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 4, 1.081346, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 6, 1.328162, SRC0, L2P_TAX_SHAPE_RANDOM},
    {"H200", 9, 0, 60, 8, 1.258208, SRC0, L2P_TAX_SHAPE_RANDOM},
    {NULL},
};

const l2p_tax_shape_slowdown_row l2p_tax_shape_slowdown_table[] = {
    {NULL},
};
