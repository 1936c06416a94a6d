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

long long l2p_l2_read_auto_repeats(size_t nbytes, size_t chunks)
{
    unsigned long long want, most;
    if (nbytes == 0 || chunks == 0) return 1;
    want = (L2P_L2_READ_AUTO_BYTES + nbytes - 1) / nbytes;
    most = L2P_L2_READ_AUTO_BLOCKS / chunks;
    if (want > most) want = most;
    return want > 0 ? (long long)want : 1;
}

int l2p_l2_read_pick_loads(const unsigned *loads, const size_t *blocks, const size_t *resident,
                           int n)
{
    int most = -1, original = -1;
    if (n <= 0) return -1;
    for (int i = 0; i < n; i++) {
        if (loads[i] == 64 && resident[i] > 0 && blocks[i] >= 4 * resident[i]) return i;
        if (most < 0 || blocks[i] >= blocks[most]) most = i; /* a tie: the fewer loads */
        if (loads[i] == 32) original = i;
    }
    if (blocks[most] < resident[most]) return most;
    return original >= 0 ? original : 0;
}
