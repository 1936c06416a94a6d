"""Shared by the benchmark scripts: arguments, the device line, markdown tables, JSON."""

from __future__ import annotations

import argparse
import json
import sys
import time

import l2persist
from l2persist._format import markdown_table


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--device", type=int, default=0)
    return p


def device_line(dev: l2persist.Device) -> str:
    p = dev.properties
    cc = "%d.%d" % p.compute_capability
    return (f"device: {p.name} (cc {cc}, {p.multiprocessor_count} SMs, L2 "
            f"{l2persist.human_bytes(p.l2_cache_size)}), driver CUDA "
            f"{'.'.join(map(str, l2persist._core.driver_version() or ()))}, "
            f"{time.strftime('%Y-%m-%d %H:%M')}")


def table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """Markdown table; columns are (key, header) (the package's one table renderer)."""
    return markdown_table(rows, columns)


def finish(args, payload: dict) -> None:
    if args.json:
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
    sys.stdout.flush()
