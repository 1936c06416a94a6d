"""The sectors rule against the hardware's own counts, over several hundred generated
patterns of the pattern kernel (one CUPTI range per launch)."""

import json
import os

import pytest

from l2persist import coalescing as C

pytestmark = pytest.mark.gpu


def test_sectors_rule_predicts_measured_requests_and_sectors(rng):
    rows = C.hardware_check(rng=rng)
    assert len(rows) >= 300
    misses = [r for r in rows if not r["match"]]
    rate = 1 - len(misses) / len(rows)
    print(f"\nsectors rule: {len(rows) - len(misses)}/{len(rows)} patterns match ({rate:.1%})")
    for r in misses[:20]:
        print(json.dumps(r, default=str))
    if os.environ.get("L2P_MODEL_REPORT"):
        with open(os.environ["L2P_MODEL_REPORT"], "w") as f:
            json.dump(rows, f, default=str)
    assert not misses, f"{len(misses)} patterns differ from the model (first: {misses[0]})"
