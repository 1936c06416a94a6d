#include "l2p_grid.h"

void l2p_streaming_grid(int multiprocessor_count, unsigned *blocks, unsigned *threads)
{
    /* 4 blocks of 512 threads per SM fill Hopper's 2048 resident threads per SM. */
    *threads = 512;
    *blocks = (unsigned)(multiprocessor_count > 0 ? multiprocessor_count : 1) * 4u;
}

size_t l2p_l2_read_chunks(size_t n_words, unsigned threads, unsigned loads)
{
    size_t rows;
    if (threads == 0 || loads == 0) return 0;
    rows = (n_words + threads - 1) / threads;
    return (rows + loads - 1) / loads;
}

void l2p_bulk_read_grid(int multiprocessor_count, unsigned *blocks, unsigned *threads)
{
    *blocks = 2u * (unsigned)(multiprocessor_count > 0 ? multiprocessor_count : 1);
    *threads = 32;
}
