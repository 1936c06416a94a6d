"""The default command: the L2 report of every GPU (or of --device N). Without a GPU it says
so, with the runtime's reason, shows what needs no GPU, and exits 0 (2 with --require-gpu).
Either way it ends by naming what to run next."""

from __future__ import annotations

import json

from .. import _core
from .._format import human_bytes
from ._common import Parser, device_problem, prog


def device_report(index: int) -> dict:
    """Everything l2persist knows about one device's L2, as plain data."""
    dev = _core.Device(index)
    report = dev.properties.as_dict()
    report["persisting_l2_limit"] = dev.persisting_l2_limit
    report["default_persisting_l2_limit"] = dev.default_persisting_l2_limit
    report["supports_persisting_l2"] = dev.supports_persisting_l2
    report["persisting_l2_granule"] = dev.persisting_l2_granule if report[
        "supports_persisting_l2"] else None
    report["mps"] = dev.mps
    report["persisting_l2_source"] = dev.persisting_l2_source
    report["mps_server_percentage"] = dev.mps_server_percentage
    report["guide_set_aside"] = _core.default_set_aside(
        report["l2_cache_size"], report["persisting_l2_cache_max_size"])
    return report


def no_gpu_report() -> dict:
    """What needs no GPU: versions and the policy arithmetic."""
    why = _core.no_device_reason()
    example = _core.plan_hit_ratios([16384, 16384], [1, 1], 16384)
    return {
        "devices": 0,
        "reason": None if why is None else {"code": why[0], "name": why[1], "description": why[2]},
        "l2persist_version": _version(),
        "cuda_runtime": "%d.%d" % _core.runtime_version(),
        "driver_supports": None if _core.driver_version() is None else
        "%d.%d" % _core.driver_version(),
        "guide_sharing_example": {
            "set_aside": 16384,
            "windows": [{"num_bytes": n, "hit_ratio": r} for n, r in example],
        },
    }


def _version() -> str:
    from .. import __version__
    return __version__


_ROWS = [
    ("name", "name"), ("compute_capability", "compute capability"),
    ("multiprocessor_count", "SMs"), ("l2_cache_size", "L2 cache"),
    ("persisting_l2_cache_max_size", "persisting L2 max"),
    ("persisting_l2_limit", "persisting L2 limit (now)"),
    ("persisting_l2_source", "set-aside decided by"),
    ("default_persisting_l2_limit", "persisting L2 limit (default)"),
    ("guide_set_aside", "guide's set-aside min(0.75 L2, max)"),
    ("persisting_l2_granule", "set-aside granule"),
    ("access_policy_max_window_size", "max access policy window"),
    ("supports_persisting_l2", "persisting L2 supported"),
    ("mps", "MPS client"),
    ("mps_server_percentage", "MPS server's L2 percentage"),
    ("global_l1_cache_supported", "global loads cached in L1"),
    ("total_memory", "global memory"), ("memory_bus_width", "memory bus (bits)"),
    ("memory_clock_khz", "memory clock (kHz)"), ("peak_memory_bandwidth", "peak bandwidth"),
    ("pci_bus_id", "PCI bus id"),
]


def _cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key == "compute_capability":
        return "%d.%d" % tuple(value)
    if key == "persisting_l2_source":
        return {"process": "this process (cudaDeviceSetLimit)",
                "mps-server": "the MPS server, fixed at its start",
                "mps-server-unknown": "the MPS server (its setting could not be read; the "
                                      "limit shown is this client's reading)"}.get(value, value)
    if key == "mps_server_percentage":
        return f"{value:g} %"
    if key == "peak_memory_bandwidth":
        return f"{value / 1e12:.2f} TB/s"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and (key.endswith(("size", "limit", "memory", "granule",
                                                 "set_aside"))):
        return f"{human_bytes(value)} ({value})"
    return str(value)


def format_table(reports: list[dict]) -> str:
    width = max(len(label) for _, label in _ROWS)
    lines = []
    for r in reports:
        lines.append(f"GPU {r['index']}")
        lines += [f"  {label:<{width}}  {_cell(key, r.get(key))}" for key, label in _ROWS]
    return "\n".join(lines)


def format_no_gpu(info: dict) -> str:
    reason = info["reason"]
    # The reason's words come from the C core (l2p_no_device_reason), as NoDeviceError's.
    why = f": {reason['description']} ({reason['name']})." if reason else "."
    lines = [
        "No CUDA device was found" + why,
        "Without a GPU, l2persist can still show:",
        f"  l2persist {info['l2persist_version']}, built with CUDA runtime "
        f"{info['cuda_runtime']}; driver supports CUDA: {info['driver_supports'] or 'no driver'}",
        "  The guide's set-aside sharing (two 16 KiB windows on a 16 KiB set-aside):",
    ]
    lines += [f"    window {i}: num_bytes={w['num_bytes']}, hit_ratio={w['hit_ratio']:.2f}"
              for i, w in enumerate(info["guide_sharing_example"]["windows"])]
    return "\n".join(lines)


def format_study(rows: list[dict]) -> str:
    """The L1/L2 study's cases (l2persist.coalescing.study_table()) with every figure labelled
    by its rule: the published figure beside the rule it was measured under, and the model's
    figure under each rule in a column named after it."""
    from ..coalescing import RULES
    import textwrap
    head = ["case", "study (published)", "study's rule"] + [f"model: {r}" for r in RULES]
    legend = ("The L1/L2 study under the coalescing model (l2persist.coalescing): the published "
              "figure and the rule it was measured under, then the model's figure under each "
              "rule: load efficiency (bytes used / bytes moved), transactions (tr), 32-byte "
              "sectors (sec); * marks the model's figure under the study's own rule.")
    out = textwrap.wrap(legend, 96) + ["| " + " | ".join(head) + " |",
                                       "|" + "---|" * len(head)]
    for r in rows:
        study = ", ".join(f"{k} {v}" for k, v in r["study"].items())
        cells = [f"{r[rule]['efficiency']:.2f} % ({r[rule]['transactions']} tr, "
                 f"{r[rule]['sectors']} sec){' *' if rule == r['study_rule'] else ''}"
                 for rule in RULES]
        out.append(f"| {r['case']} | {study} | {r['study_rule']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def next_steps(have_gpu: bool) -> str:
    """What to run next, in one or two lines."""
    from ..studies import list_studies
    me = prog()
    advise = f"{me} advise -- python your_program.py"
    if have_gpu:
        return (f"Next: {me} run <study>   (the studies: {me} list)\n"
                f"      {advise}   (a plan for your own program)")
    here = [s.name for s in list_studies() if not s.needs_gpu]
    return (f"Next: {me} run {here[0] if here else '<study>'}   (runs without a GPU; the "
            f"studies: {me} list)\n"
            f"      on a GPU: {advise}   (a plan for your own program)")


def main(argv: list[str], description: str) -> int:
    """`python -m l2persist [--device N] [--json] [--require-gpu]`."""
    import argparse
    p = Parser(prog=prog(), description=description,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    p.add_argument("--device", type=int, default=None, help="report only this GPU index")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--require-gpu", action="store_true",
                   help="exit with status 2 when no GPU is found")
    args = p.parse_args(argv)

    from ..coalescing import study_table

    count = _core.device_count()
    problem = device_problem(args.device, count)
    if problem:
        p.error(problem)
    if count == 0:
        info = no_gpu_report()
        info["coalescing_study"] = study_table()
        print(json.dumps(info, indent=2) if args.json else
              format_no_gpu(info) + "\n\n" + format_study(info["coalescing_study"]) + "\n\n"
              + next_steps(False))
        return 2 if args.require_gpu else 0
    indices = [args.device] if args.device is not None else list(range(count))
    reports = [device_report(i) for i in indices]
    if args.json:
        print(json.dumps({"devices": count, "reports": reports,
                          "coalescing_study": study_table()}, indent=2))
    else:
        print(format_table(reports))
        print("\n" + format_study(study_table()))
        print("\n" + next_steps(True))
    return 0
