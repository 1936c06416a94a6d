"""Streaming bandwidth at the roofline: cudaMemcpy D2D (read + write counted), streaming
read / write / copy / triad with the load and store flavours, and the L2-resident read.

Targets (issue 4): streaming read >= 0.95 x the best read bandwidth of this run; L2-resident
read >= 9.5 TB/s on an H200."""

import numpy as np

import l2persist
from l2persist import kernels as K
from _common import device_line, finish, parser, table

PROBE_READ_TBS = 4.38  # the streaming-read probe measured on the lent H200 (DESIGN.md)


def main():
    p = parser(__doc__)
    p.add_argument("--gib", type=float, default=2.0, help="buffer size for streaming (GiB)")
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    dev = l2persist.Device(args.device)
    print(device_line(dev))
    nbytes = int(args.gib * (1 << 30)) // 16 * 16
    rows = []
    with l2persist.Stream(dev) as s, l2persist.empty(nbytes // 4, np.float32, dev) as a, \
            l2persist.empty(nbytes // 4, np.float32, dev) as b, \
            l2persist.empty(nbytes // 4, np.float32, dev) as c:
        for buf in (a, b, c):
            K.stream_write(buf, stream=s)

        def run(name, fn, traffic, **extra):
            t = l2persist.benchmark(fn, stream=s, repeat=args.repeat, warmup=3)
            rows.append(dict(kernel=name, bytes=traffic, ms=t.median,
                             tbs=t.bandwidth(traffic) / 1e12, iqr_ms=t.iqr, **extra))

        run("cudaMemcpy D2D", lambda: l2persist.copy(b, a, stream=s), 2 * nbytes)
        for load in ("default", "cg", "cs", "nc", "lu", "evict_first"):
            run(f"read ({load})", lambda load=load: K.stream_read(a, load=load, stream=s), nbytes)
        for store in ("wb", "cs"):
            run(f"write ({store})", lambda st=store: K.stream_write(b, store=st, stream=s), nbytes)
        run("copy (default/wb)", lambda: K.stream_copy(b, a, stream=s), 2 * nbytes)
        run("copy (cs/cs)", lambda: K.stream_copy(b, a, load="cs", store="cs", stream=s),
            2 * nbytes)
        run("triad (default/wb)", lambda: K.triad(c, a, b, 3.0, stream=s), 3 * nbytes)
        sms = dev.properties.multiprocessor_count
        for mib in (8, 16, 24, 32, 48):
            view = a[: mib * (1 << 20) // 4]
            reps = max(1, (16 << 30) // view.nbytes)  # ~16 GiB read per launch
            K.l2_read(view, 1, stream=s)
            for width, loads in ((8, 64), (16, 32), (8, 32)) if mib == 16 else ((8, 64),):
                run(f"L2-resident read {mib} MiB x{reps} ({width}-byte loads, {loads}/thread)",
                    lambda v=view, r=reps, w=width, n=loads:
                    K.l2_read(v, r, width=w, loads=n, stream=s), view.nbytes * reps)
        for mib in (8, 16, 32, 48):
            view = a[: mib * (1 << 20) // 4]
            for chunk, per_sm in ((16384, 2), (32768, 1), (8192, 4)) if mib == 16 else ((16384, 2),):
                run(f"L2-resident bulk read {mib} MiB x200 ({chunk // 1024} KiB chunks, "
                    f"{per_sm} blocks/SM)",
                    lambda v=view, c=chunk, b=per_sm * sms:
                    K.bulk_read(v, 200, chunk=c, blocks=b, stream=s), view.nbytes // chunk * chunk * 200)
    best_read = max(r["tbs"] for r in rows if r["kernel"].startswith(("read", "cudaMemcpy")))
    for r in rows:
        r["vs_best_read"] = r["tbs"] / best_read
    print(table(rows, [("kernel", "kernel"), ("ms", "median ms"), ("iqr_ms", "IQR ms"),
                       ("tbs", "TB/s"), ("vs_best_read", "/ best read")]))
    read = max(r["tbs"] for r in rows if r["kernel"].startswith("read"))
    memcpy = next(r["tbs"] for r in rows if r["kernel"] == "cudaMemcpy D2D")
    l2 = max(r["tbs"] for r in rows if r["kernel"].startswith("L2-resident"))
    summary = {"read_tbs": read, "memcpy_tbs": memcpy, "read_over_memcpy": read / memcpy,
               "read_over_probe": read / PROBE_READ_TBS, "l2_read_tbs": l2,
               "target_read_met": read >= 0.95 * max(memcpy, PROBE_READ_TBS),
               "target_l2_met": l2 >= 9.5}
    print(f"\nstreaming read {read:.2f} TB/s = {read / memcpy:.3f} x memcpy D2D "
          f"({memcpy:.2f} TB/s), {read / PROBE_READ_TBS:.3f} x the 4.38 TB/s probe; "
          f"L2-resident read {l2:.2f} TB/s (target 9.5)")
    finish(args, {"device": device_line(dev), "rows": rows, "summary": summary})


if __name__ == "__main__":
    main()
