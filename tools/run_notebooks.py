#!/usr/bin/env python3
"""Execute notebooks under a real Jupyter kernel (nbclient + ipykernel) and save them with
their outputs: what tools/gpu-check runs on the GPU to refresh the committed notebooks.

    python tools/run_notebooks.py [--out DIR] [--timeout S] notebooks/*.ipynb

Each notebook runs with its own folder as the working directory (it reads and writes
results/<study>.json there) and imports this tree's l2persist. Without a GPU a study
notebook draws the results stored in results/ with the current study code: the way to
refresh stored pictures after a change to a plot or a finding. Exits 1 if any notebook
raised."""

import argparse
import os
import shutil
import sys
import time


def execute(path: str, timeout: int):
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}})
    client.execute()
    return nb


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("notebooks", nargs="+")
    p.add_argument("--out", help="write the executed notebooks (and results/) here")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = p.parse_args()
    import nbformat
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend must draw the plots
    # the kernel imports this tree's l2persist, whatever another install says
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    failed = 0
    for path in args.notebooks:
        t0 = time.perf_counter()
        try:
            nb = execute(path, args.timeout)
            status = "ok"
        except Exception as e:  # noqa: BLE001 - report every notebook, then fail
            failed += 1
            status = f"FAILED: {type(e).__name__}: {str(e)[-800:]}"
            nb = None
        print(f"{path}: {status} ({time.perf_counter() - t0:.1f} s)", flush=True)
        if nb is not None and args.out:
            os.makedirs(args.out, exist_ok=True)
            nbformat.write(nb, os.path.join(args.out, os.path.basename(path)))
    if args.out:
        src = os.path.join(os.path.dirname(os.path.abspath(args.notebooks[0])), "results")
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(args.out, "results"), dirs_exist_ok=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
