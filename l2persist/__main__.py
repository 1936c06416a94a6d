"""python -m l2persist: the command line (l2persist.cli)."""

import sys

from .cli import device_report, main  # device_report: tests/mps_client.py

__all__ = ["device_report", "main"]

if __name__ == "__main__":
    sys.exit(main())
