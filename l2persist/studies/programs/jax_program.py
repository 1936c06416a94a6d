"""A JAX program: a ``jax.jit`` step with a hot table; l2persist (and PyTorch) nowhere in it.

Each step (one jitted XLA computation, its buffers donated so the table is updated in place):
draws keys from a split of the step's PRNG key, adds them into an int32 histogram of about 65 %
of the L2 (``hist.at[keys].add(1)``: a scatter-add, integer atomics, deterministic), gathers
the table at other keys (``hist[idx].sum()``), counts the keys per segment
(``jax.ops.segment_sum``) and sums a buffer of 1.5 x L2 (traffic streaming past; uint32 sums,
which wrap the same way every run). The L2 size comes from the driver
(``cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)`` through ctypes: JAX does not give
it). ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` is set before JAX is imported (JAX would otherwise
take 75 % of the GPU's memory at start). The host waits only in ``block_until_ready()``,
every 20 steps and at the end.

What ``python -m l2persist advise -- python jax_program.py`` can and cannot see here:

- It can see the kernels and graphs: XLA launches its kernels through the CUDA driver
  (``cuLaunchKernel``) and, where it makes them, its command buffers as CUDA graphs
  (``cuGraphLaunch``); CUDA's activity records and callbacks see both, whoever launches them,
  and the table's range is a range XLA's allocator handed out (donated, it keeps its address
  from step to step), so a window can name it from the kernels' parameters.
- It cannot see the program from Python: no PyTorch is imported, so no PyTorch hook
  (``CUDAGraph.replay``, ``torch.cuda.synchronize``, the caching allocator's segments) fires,
  and the only host waits are ``block_until_ready()``, C++ inside jaxlib that no Python hook
  sees. A watcher that switches plans only at Python-visible calls never gets a chance here;
  one that switches from its own thread, on a timer, between captures, does.

It writes a digest (the table, the gathered, counted and streamed sums) to OUT, the same for the
same seed and iteration count whatever the timing. It prints one line to stderr,
``loop: N iterations in S s``: the live study reads its throughput there.

usage: jax_program.py OUT [--iters N] [--seed S]
"""
import os

os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"   # before jax is imported

import argparse  # noqa: E402
import ctypes  # noqa: E402
import functools  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

KEYS = 1 << 17
SEGMENTS = 1024
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38


def l2_bytes() -> int:
    """The first visible GPU's L2 size, from the driver (JAX does not report it)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, value = ctypes.c_int(), ctypes.c_int()
    for rc in (lambda: cuda.cuInit(0), lambda: cuda.cuDeviceGet(ctypes.byref(dev), 0),
               lambda: cuda.cuDeviceGetAttribute(ctypes.byref(value),
                                                 CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev)):
        err = rc()
        if err != 0:
            raise RuntimeError(f"the CUDA driver could not give the L2 size (CUresult {err})")
    return value.value


@functools.partial(jax.jit, donate_argnums=(0, 1, 2))
def step(hist, sums, key, past):
    key, k1, k2 = jax.random.split(key, 3)
    keys = jax.random.randint(k1, (KEYS,), 0, hist.shape[0], dtype=jnp.int32)
    idx = jax.random.randint(k2, (KEYS,), 0, hist.shape[0], dtype=jnp.int32)
    hist = hist.at[keys].add(1)                                  # the hot table
    gathered = jnp.sum(hist[idx], dtype=jnp.uint32)
    per_seg = jax.ops.segment_sum(jnp.ones((KEYS,), jnp.uint32), keys % SEGMENTS,
                                  num_segments=SEGMENTS)
    streamed = jnp.sum(past, dtype=jnp.uint32)                   # streaming past
    sums = sums.at[0].add(gathered).at[1].add(streamed).at[2:].add(per_seg)
    return hist, sums, key


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=23)
    a = ap.parse_args()
    l2 = l2_bytes()
    dev = jax.devices("gpu")[0]
    hist = jax.device_put(jnp.zeros((int(l2 * 0.65) // 4,), jnp.int32), dev)
    past = jax.device_put(jnp.ones((int(l2 * 1.5) // 4,), jnp.uint32), dev)
    sums = jax.device_put(jnp.zeros((2 + SEGMENTS,), jnp.uint32), dev)
    key = jax.device_put(jax.random.PRNGKey(a.seed), dev)
    # compile before the clock starts, on copies (the program's own table is not touched)
    jax.block_until_ready(step(jnp.zeros_like(hist), jnp.zeros_like(sums), jnp.copy(key),
                               past))
    jax.block_until_ready((hist, sums, key))
    t0 = time.perf_counter()
    for it in range(a.iters):
        hist, sums, key = step(hist, sums, key, past)
        if it % 20 == 19:
            hist.block_until_ready()
    jax.block_until_ready((hist, sums, key))
    print(f"loop: {a.iters} iterations in {time.perf_counter() - t0:.4f} s", file=sys.stderr)
    h = np.asarray(hist)
    s = np.asarray(sums)
    digest = {"hist": hashlib.sha256(h.tobytes()).hexdigest(),
              "hist_total": int(h.sum(dtype=np.int64)),
              "gathered": int(s[0]), "streamed": int(s[1]),
              "segments": hashlib.sha256(s[2:].tobytes()).hexdigest()}
    with open(a.out, "w") as f:
        json.dump(digest, f)


if __name__ == "__main__":
    main()
