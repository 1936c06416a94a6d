#!/usr/bin/env python3
"""A part's row for docs/results/gpu-suite.md, from its pytest JUnit file (tools/gpu-check).

    tools/ledger_row.py JUNIT PART GPU_TXT REVISION SEED FAILED NARROWED

GPU_TXT: nvidia-smi's name, driver and memory lines, one per visible GPU (the row names the
first GPU's model). FAILED: nonempty when another step of the run failed (a part passed only
when its run passed as a whole). NARROWED: the PYTEST_ARGS / TESTS that narrowed the run,
which marks the row partial (a part passed only when all of it ran). Prints one line,
``ledger: | part | GPU | revision | seed | passed | skipped | date |``."""
import datetime
import sys
import xml.etree.ElementTree as ET


def row(junit, part, gpu_txt, rev, seed, failed, narrowed, today=None):
    n = {"tests": 0, "skipped": 0, "failures": 0, "errors": 0}
    try:
        for suite in ET.parse(junit).iter("testsuite"):
            for k in n:
                n[k] += int(suite.get(k, 0))
    except (OSError, ET.ParseError):
        return f"ledger: no JUnit file for part {part}: nothing to record"
    try:
        with open(gpu_txt) as f:
            gpu = f.readline().split(",")[0].strip() or "unknown GPU"
    except OSError:
        gpu = "unknown GPU"
    bad = n["failures"] + n["errors"]
    passed = n["tests"] - n["skipped"] - bad
    result = f"{passed} ({bad} failed)" if bad else str(passed)
    if failed and not bad:
        result += " (another step failed)"
    if narrowed.strip():
        result += f" (partial: {narrowed.strip()})"
    today = today or datetime.date.today().isoformat()
    return f"ledger: | {part} | {gpu} | {rev} | {seed} | {result} | {n['skipped']} | {today} |"


if __name__ == "__main__":
    if len(sys.argv) != 8:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print(row(*sys.argv[1:]))
