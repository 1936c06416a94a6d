"""tools/: the GPU suite's parts cover every test file once, and the investigations' index names
each script there and only data files that exist (no GPU)."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import types

import pytest

import tool_script

ROOT = pathlib.Path(__file__).resolve().parent.parent
GPU_CHECK = ROOT / "tools" / "gpu-check"
INVESTIGATIONS = ROOT / "tools" / "investigations"


def _parts(root=ROOT, **env):
    return subprocess.run(["bash", str(root / "tools" / "gpu-check"), "--parts"],
                          capture_output=True, text=True, timeout=60, cwd=root,
                          env={"PATH": "/usr/bin:/bin", **env})


def test_every_test_file_is_in_exactly_one_part():
    r = _parts()
    assert r.returncode == 0, r.stderr
    listed = {}
    for line in r.stdout.splitlines():
        name, files = line.split(":", 1)
        for f in files.split():
            assert f not in listed, f"{f} in {listed[f]} and {name}"
            listed[f] = name
    assert set(listed.values()) == {"core", "live", "live-programs", "studies", "zoo-graphs",
                                    "zoo-torch", "zoo-libs", "notebooks", "cpu"}
    here = {p.stem for p in (ROOT / "tests").glob("test_*.py")}
    assert set(listed) == here


# A test file that asks whether a GPU is here takes a GPU branch on the GPU machine: it may not
# be in the part cpu, which runs with the GPU hidden (that branch would never run on a GPU).
GPU_BRANCH = re.compile(r"is_available\(\)|device_count\(\)")


def test_the_part_cpu_holds_no_file_with_a_gpu_branch():
    cpu = next(line.split(":", 1)[1].split() for line in _parts().stdout.splitlines()
               if line.startswith("cpu:"))
    assert len(cpu) >= 20
    branching = []
    for f in cpu:
        text = (ROOT / "tests" / f"{f}.py").read_text()
        # a stand-in's is_available (a fake module's lambda) is no GPU branch
        text = re.sub(r"is_available=lambda[^,)]*", "", text)
        text = re.sub(r'"device_count", lambda', "", text)
        text = "\n".join(line for line in text.splitlines()
                         if not line.startswith("GPU_BRANCH = "))      # this very rule
        if GPU_BRANCH.search(text):
            branching.append(f)
    # this file's one branch skips where torch sees a GPU: hidden, it takes the CI path
    assert branching == ["test_tools_cpu"], branching


def _planted(tmp_path):
    """A copy of the script in a tree whose tests/ holds exactly the files its parts list."""
    (tmp_path / "tools").mkdir()
    shutil.copy(GPU_CHECK, tmp_path / "tools" / "gpu-check")
    (tmp_path / "tests").mkdir()
    for line in _parts().stdout.splitlines():
        for f in line.split(":", 1)[1].split():
            (tmp_path / "tests" / f"{f}.py").write_text("")
    return tmp_path


def test_a_test_file_in_no_part_fails_the_check(tmp_path):
    root = _planted(tmp_path)
    assert _parts(root).returncode == 0
    (root / "tests" / "test_brand_new.py").write_text("")
    r = _parts(root)
    assert r.returncode != 0
    assert "tests/test_brand_new.py is in no part" in r.stderr
    # a real run refuses before it touches the GPU, and says the same
    r = subprocess.run(["bash", str(root / "tools" / "gpu-check")], capture_output=True,
                       text=True, timeout=60, cwd=root,
                       env={"PATH": "/usr/bin:/bin", "PART": "core", "OUT": str(tmp_path / "o")})
    assert r.returncode == 2 and "test_brand_new.py is in no part" in r.stderr
    assert not (tmp_path / "o").exists()


def test_a_part_listing_a_missing_file_fails_the_check(tmp_path):
    root = _planted(tmp_path)
    (root / "tests" / "test_cpu.py").unlink()
    r = _parts(root)
    assert r.returncode != 0 and "tests/test_cpu.py, which does not exist" in r.stderr


def test_an_unknown_part_is_refused_by_name(tmp_path):
    root = _planted(tmp_path)
    r = subprocess.run(["bash", str(root / "tools" / "gpu-check")], capture_output=True,
                       text=True, timeout=60, cwd=root,
                       env={"PATH": "/usr/bin:/bin", "PART": "everything",
                            "OUT": str(tmp_path / "o")})
    assert r.returncode == 2
    assert "no part named 'everything'" in r.stderr and "core live live-programs studies zoo-graphs zoo-torch zoo-libs notebooks" in r.stderr
    assert not (tmp_path / "o").exists()


def _index_rows():
    text = (INVESTIGATIONS / "README.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows
    return rows


def test_the_investigations_index_names_every_script_there():
    named = set()
    for row in _index_rows():
        named |= set(re.findall(r"`([^`]+)`", row.split("|")[1]))
    there = {p.name for p in INVESTIGATIONS.iterdir() if p.name != "README.md"}
    assert named == there


@pytest.mark.parametrize("row", _index_rows(), ids=lambda r: r.split("`")[1])
def test_each_data_file_the_index_names_exists(row):
    data = row.split("|")[4]
    for name in re.findall(r"`([^`/]+\.(?:json|log))`", data):
        assert (ROOT / "docs" / "data" / name).is_file(), name
    for path in re.findall(r"`([^`]+/[^`]+)`", data):
        assert (ROOT / path).is_file(), path


def _share(gpus, **env):
    return subprocess.run(["bash", str(GPU_CHECK)], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PART": "all", "GPUS": str(gpus),
                               "DRY_RUN": "1", **env})


def _lanes(r):
    """DRY_RUN's answer: the lanes' GPU lists and the queue of parts."""
    lines = r.stdout.split("\n")
    lanes = [line.split()[1].split(",") for line in lines if line.startswith("lane ")]
    queue = [line.split()[1:] for line in lines if line.startswith("queue ")]
    assert len(queue) == 1, r.stdout
    return [[int(d) for d in lane] for lane in lanes], queue[0]


def test_only_parts_picks_some_parts_in_its_order_and_names_a_wrong_one():
    """ONLY_PARTS runs some of the parts, in the order given (the lanes take them in it)."""
    r = _share(4, ONLY_PARTS="studies core live live-programs")
    assert r.returncode == 0, r.stderr
    lanes, queue = _lanes(r)
    assert lanes == [[0], [1], [2], [3]] and queue == ["studies", "core", "live", "live-programs"]
    r = _share(4, ONLY_PARTS="core nope")
    assert r.returncode == 2 and "no part named 'nope'" in r.stderr
    r = _share(4, ONLY_PARTS="core live core")
    assert r.returncode == 2 and "names a part twice" in r.stderr


@pytest.mark.parametrize("gpus", [8, 9, 15])
def test_part_all_gives_each_part_gpus_of_its_own(gpus):
    """PART=all with a GPU per part (the whole suite in one call): a lane per part, each on GPUs
    of its own, as many each as the machine has for all of them."""
    r = _share(gpus)
    assert r.returncode == 0, r.stderr
    lanes, queue = _lanes(r)
    parts = _gpu_parts()
    assert queue == parts and len(lanes) == len(parts)
    assert "cpu-lane cpu" in r.stdout.splitlines()
    devs = [d for lane in lanes for d in lane]
    assert devs == list(range(gpus))                  # every GPU in one lane, none shared
    sizes = [len(lane) for lane in lanes]             # the spare GPUs go to the first lanes
    assert sizes == sorted(sizes, reverse=True) and sizes[0] - sizes[-1] <= 1


def test_a_part_named_first_gets_the_spare_gpus():
    """Four GPUs, three parts: the first part named (zoo-libs, whose ddp program needs two
    GPUs) gets two, the others one each."""
    r = _share(4, ONLY_PARTS="zoo-libs live-programs live")
    assert r.returncode == 0, r.stderr
    assert _lanes(r) == ([[0, 1], [2], [3]], ["zoo-libs", "live-programs", "live"])


@pytest.mark.parametrize("gpus", [1, 2, 3])
def test_fewer_gpus_than_parts_make_a_lane_per_gpu_and_queue_the_parts(gpus):
    r = _share(gpus)
    assert r.returncode == 0, r.stderr
    lanes, queue = _lanes(r)
    assert lanes == [[i] for i in range(gpus)]
    assert queue == _gpu_parts()


def _gpu_parts():
    return [line.split(":", 1)[0] for line in _parts().stdout.splitlines()
            if not line.startswith("cpu:")]


def test_the_part_cpu_takes_a_lane_of_its_own_beside_the_gpu_lanes():
    """The part cpu never queues on a GPU lane: one GPU and ONLY_PARTS="cpu core" give one GPU
    lane for core and the cpu lane; "cpu" alone gives no GPU lane."""
    r = _share(1, ONLY_PARTS="cpu core")
    assert r.returncode == 0, r.stderr
    assert _lanes(r) == ([[0]], ["core"]) and "cpu-lane cpu" in r.stdout.splitlines()
    r = _share(1, ONLY_PARTS="cpu")
    assert r.returncode == 0, r.stderr
    assert _lanes(r) == ([], []) and "cpu-lane cpu" in r.stdout.splitlines()
    r = _share(2, ONLY_PARTS="core live")
    assert "cpu-lane" not in r.stdout


def test_part_all_refuses_a_machine_without_gpus():
    r = _share(0)
    assert r.returncode == 2 and "needs a GPU" in r.stderr and "0 GPU(s)" in r.stderr


# nvidia-smi, not the library: in gpu-check's part cpu the GPU is hidden from this process, and
# the stand-in parts (CUDA_VISIBLE_DEVICES=0...) would open contexts on the GPU the real parts
# are using
NO_GPU_HERE = pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None,
    reason="a GPU is here (nvidia-smi): the stand-in parts would open contexts on GPUs that the "
           "real parts (PART=all) are using")


def _run_all(tmp_path, gpus, **env):
    """PART=all end to end without a GPU: a stand-in nvidia-smi says `gpus` GPUs and logs what
    each part asks it; each part runs a small CPU test file instead of its own files. Returns
    the run, the summary's rows {part: (gpus, result)}, the GPUs the parts asked about, and the
    archive's names."""
    import tarfile
    shim = tmp_path / "bin"
    shim.mkdir()
    log = tmp_path / "smi.log"
    log.write_text("")
    (shim / "nvidia-smi").write_text(
        "#!/bin/bash\n"
        f"echo \"$*\" >> {log}\n"
        f"if [ \"$1\" = -L ]; then for i in $(seq 0 {gpus - 1}); do echo \"GPU $i: Stand-in\";"
        " done; exit 0; fi\n"
        "echo 'Stand-in GPU, 1.0, 1 MiB'\n")
    (shim / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}", PART="all", SKIP_BUILD="1",
               TESTS="tests/test_names_cpu.py", OUT=str(out),
               SKIP_CTEST="1", SKIP_SANITIZER="1", **{"DEADLINE": "540", **env})
    r = subprocess.run(["bash", str(GPU_CHECK)], capture_output=True, text=True, timeout=300,
                       env=env, cwd=ROOT)
    rows = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[0] != "part" and not cells[0].startswith("---"):
            rows[cells[0]] = (cells[1], cells[2])
    asked = [line.split()[1] for line in log.read_text().splitlines() if line.startswith("-i ")]
    names = []
    if (out / "parts.tar.gz").exists():
        with tarfile.open(out / "parts.tar.gz") as t:
            names = t.getnames()
    return r, rows, asked, names


@NO_GPU_HERE
def test_part_all_runs_every_part_on_its_own_gpu_and_packs_one_archive(tmp_path):
    """One GPU more than parts: each part runs at once on a GPU of its own, queries that GPU
    once, and the logs of all come back in one archive with a row each."""
    parts = _gpu_parts()
    r, rows, asked, names = _run_all(tmp_path, len(parts) + 1)
    assert list(rows) == parts + ["cpu"], r.stdout
    assert all(res == "passed" for _, res in rows.values()), r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    # lane i runs part i: the first part gets the spare GPU (0,1), the others one each; the
    # part cpu none (its nvidia-smi asks about no GPU of its own)
    gpus = [g for p, (g, _) in rows.items() if p != "cpu"]
    assert gpus == ["0,1"] + [str(i + 1) for i in range(1, len(parts))]
    assert rows["cpu"][0] == "none"
    assert sorted(asked) == sorted(g.split(",")[0] for g in gpus)   # its first GPU
    for p in parts + ["cpu"]:
        assert f"parts/{p}/work/logs/junit_1.xml" in names and f"parts/{p}.out" in names
    assert not any("pytest-tmp" in n for n in names)


@NO_GPU_HERE
def test_part_all_queues_more_parts_than_gpus_on_lanes(tmp_path):
    """Two GPUs, three parts: every part runs once, on one of the two GPUs, and some GPU runs
    two of them one after the other (never two parts at once on one GPU)."""
    r, rows, asked, names = _run_all(tmp_path, 2, ONLY_PARTS="studies core notebooks")
    assert list(rows) == ["studies", "core", "notebooks"], r.stdout
    assert all(res == "passed" for _, res in rows.values()), r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(asked) in (["0", "0", "1"], ["0", "1", "1"])
    assert sorted(g for g, _ in rows.values()) == sorted(asked)
    for p in rows:
        assert f"parts/{p}/work/logs/junit_1.xml" in names
    # the shared GPU's two parts ran one after the other: their pytest runs do not overlap
    import datetime
    import tarfile
    import xml.etree.ElementTree as ET
    with tarfile.open(tmp_path / "out" / "parts.tar.gz") as t:
        t.extractall(tmp_path / "x", filter="data")
    spans = []
    for p, (g, _) in rows.items():
        if asked.count(g) == 2:
            suite = next(ET.parse(tmp_path / "x" / "parts" / p / "work" / "logs" / "junit_1.xml")
                         .iter("testsuite"))
            t0 = datetime.datetime.fromisoformat(suite.get("timestamp")).timestamp()
            spans.append((t0, t0 + float(suite.get("time"))))
    assert len(spans) == 2
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0, spans


@NO_GPU_HERE
def test_a_part_without_time_left_is_not_started_and_fails_the_call(tmp_path):
    r, rows, asked, names = _run_all(tmp_path, 1, ONLY_PARTS="core studies", MIN_PART_S="100000")
    assert r.returncode == 1, r.stdout + r.stderr
    assert all(res.startswith("not started") for _, res in rows.values()), r.stdout
    assert asked == []


@NO_GPU_HERE
def test_a_lane_starts_only_a_part_that_fits_the_time_left(tmp_path):
    """One GPU, 240 s to the deadline: zoo-libs (about 450 s on an H200) is not started, and
    the lane goes on to studies (about 95 s), which runs; the call fails (a part not run)."""
    r, rows, asked, names = _run_all(tmp_path, 1, ONLY_PARTS="zoo-libs studies", DEADLINE="240")
    assert r.returncode == 1, r.stdout + r.stderr
    assert rows["zoo-libs"][1].startswith("not started") and "needs 450 s" in rows["zoo-libs"][1]
    assert rows["studies"] == ("0", "passed"), r.stdout
    d = _share(1, ONLY_PARTS="zoo-libs studies cpu")
    assert "needs zoo-libs 450 s" in d.stdout and "needs cpu 360 s" in d.stdout
    assert "needs zoo-libs 7 s" in _share(1, ONLY_PARTS="zoo-libs", MIN_PART_S="7").stdout


def _ledger(tmp_path, junit_xml, narrowed="", failed="", gpus=("NVIDIA H200",)):
    junit = tmp_path / "junit.xml"
    if junit_xml is None:
        junit.unlink(missing_ok=True)
    else:
        junit.write_text(junit_xml)
    gpu = tmp_path / "gpu.txt"
    gpu.write_text("".join(f"{g}, 580.159.04, 143771 MiB\n" for g in gpus))
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "ledger_row.py"), str(junit), "live",
                        str(gpu), "abc1234", "42", failed, narrowed],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_ledger_row_names_one_gpu_and_marks_narrowed_or_failed_runs(tmp_path):
    """The row gpu-check prints for docs/results/gpu-suite.md. On two H200s a one-part run
    named the GPU twice, across a line break, and a run narrowed by PYTEST_ARGS read as the
    part passing (2026-11-28)."""
    ok = ('<testsuites><testsuite tests="10" skipped="2" failures="0" errors="0"/>'
          '<testsuite tests="3" skipped="0" failures="0" errors="0"/></testsuites>')
    row = _ledger(tmp_path, ok, gpus=("NVIDIA H200", "NVIDIA H200"))
    assert re.fullmatch(r"ledger: \| live \| NVIDIA H200 \| abc1234 \| 42 \| 11 \| 2 \| "
                        r"\d{4}-\d\d-\d\d \|", row), row
    assert "(partial: -k jax_program)" in _ledger(tmp_path, ok, narrowed="-k jax_program")
    assert "| 11 (another step failed) |" in _ledger(tmp_path, ok, failed="failed")
    bad = '<testsuite tests="10" skipped="1" failures="1" errors="1"/>'
    assert "| 7 (2 failed) | 1 |" in _ledger(tmp_path, bad)
    assert "no JUnit file for part live" in _ledger(tmp_path, None)


LIVE_ZOO = ROOT / "tools" / "live-zoo"


def _live_zoo(args, gpus, tmp_path):
    env = dict(os.environ, GPUS=str(gpus))
    return subprocess.run([sys.executable, str(LIVE_ZOO), "--out", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)


def test_live_zoo_gives_each_program_its_gpus_in_order_and_lists_the_rest():
    """Four GPUs: the two-rank program takes two, then one each while they last; the program
    that does not fit is named, not started."""
    r = _live_zoo(["--dry-run", "ddp", "decode_big", "eager_implicit", "hf_generate"], 4,
                  ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["ddp: GPU 0,1", "decode_big: GPU 2",
                                     "eager_implicit: GPU 3",
                                     "hf_generate: not started (no GPU left)"]
    r = _live_zoo(["--dry-run", "decode_big", "nope"], 4, ROOT)
    assert r.returncode == 2 and "nope" in r.stderr
    r = _live_zoo(["--dry-run", "decode_big", "decode_big"], 4, ROOT)
    assert r.returncode == 2 and "each once" in r.stderr


@NO_GPU_HERE      # the part would run the whole study on the GPU it names, hidden or not
def test_live_zoo_runs_each_part_and_says_which_wrote_no_result(tmp_path):
    """Without a GPU each part is started and refuses at once (the study needs one): its log
    keeps the study's own words, the table says it wrote no result, and the exit status is 1;
    the program past the GPUs is not started."""
    (tmp_path / "live-study-decode_big.json").write_text('{"records": [{"bars_met": "6 of 6"}]}')
    r = _live_zoo(["decode_big", "cupy_only"], 1, tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "| decode_big | 0 | 2 | no result |" in r.stdout
    assert "| cupy_only | - | not started |" in r.stdout
    assert "needs a CUDA GPU" in (tmp_path / "decode_big.log").read_text()
    assert not (tmp_path / "cupy_only.log").exists()
    assert not (tmp_path / "live-study-decode_big.json").exists()   # the earlier run's: gone


def test_zoo_advise_placebo_reads_loops_and_works_out_observing(monkeypatch, tmp_path):
    """tools/investigations/zoo-advise --placebo (no GPU: its runs faked): the loop times come
    from the programs' own `loop:` lines, plain and placebo alternate, and observing is the
    loops' ratio over the share of the placebo loop the search took; every other round runs
    backwards (the plain run last), and a run that wrote no digest is no match."""
    import json as _json
    za = tool_script.load("tools/investigations/zoo-advise")
    assert za.loop_s("x\nloop: 10 iterations in 2.5000 s\n") == 2.5 and za.loop_s("") is None
    calls = []

    def fake_run(cmd, timeout, env=None):
        placebo = "--placebo" in cmd
        calls.append("placebo" if placebo else "plain")
        out = cmd[cmd.index("--iters") - 1]
        with open(out, "w") as f:
            _json.dump({"digest": 1}, f)
        if placebo:
            with open(cmd[cmd.index("--json") + 1], "w") as f:
                _json.dump({"decision_s": 30.0, "result": {"helps": bool(env)}, "watching": {
                    "observing_share": 0.012, "ahead": 0 if env else 40, "ahead_hidden": 36,
                    "ahead_ms_median": 2.9, "switch_work_ms_median": 0.4, "rests": 50,
                    "rests_capped": 7}}, f)
        secs = 61.2 if placebo else 60.0
        return types.SimpleNamespace(returncode=0, stderr=f"loop: 9 iterations in {secs} s\n"), 1
    monkeypatch.setattr(za, "run", fake_run)
    (r,) = za.placebo("eager_implicit", 9, 55, str(tmp_path), rounds=2)
    assert calls == ["plain", "placebo", "placebo", "plain"]
    assert r["same"] and r["loop_ratio"] == pytest.approx(1.02)
    # round 2's placebo run writes no digest: last round's file is gone, so no match
    def silent_second(cmd, timeout, env=None):
        if "--placebo" in cmd and calls.count("placebo") == 1:
            calls.append("placebo")
            return types.SimpleNamespace(returncode=1, stderr=""), 1
        return fake_run(cmd, timeout, env)
    calls.clear()
    monkeypatch.setattr(za, "run", silent_second)
    (r,) = za.placebo("eager_implicit", 9, 55, str(tmp_path), rounds=2)
    assert calls == ["plain", "placebo", "placebo", "plain"] and r["same"] is False
    assert r["placebo_loop_s"] == [61.2, None]
    monkeypatch.setattr(za, "run", fake_run)
    assert r["search_share_of_loop"] == pytest.approx(30 / 61.2)
    assert r["observing_mixproof"] == pytest.approx(0.02 * 61.2 / 30)
    assert r["plain_spread"] == 0.0 and r["separated"] is True
    # a noisy machine: a plain run as long as the placebo's is no separation
    plain_secs = iter([60.0, 61.5])

    def noisy_run(cmd, timeout, env=None):
        p, n = fake_run(cmd, timeout)
        if "--placebo" not in cmd:
            p.stderr = f"loop: 9 iterations in {next(plain_secs)} s\n"
        return p, n
    monkeypatch.setattr(za, "run", noisy_run)
    (r,) = za.placebo("eager_implicit", 9, 55, str(tmp_path), rounds=2)
    assert r["plain_spread"] == pytest.approx(1.5 / 60.75) and r["separated"] is False
    # each placebo run over its own round's plain run (61.2 s each round)
    assert r["paired_ratios"] == pytest.approx([61.2 / 60.0, 61.2 / 61.5])
    assert za._span(r["paired_ratios"]) == "0.995-1.020" and za._span([]) == "-"
    # variants: each round a plain run, then a placebo per variant with its flags and its
    # environment; one row each
    flagged = []

    def variant_run(cmd, timeout, env=None):
        if "--placebo" in cmd:
            flagged.append(("--replay-events" in cmd, env))
        return fake_run(cmd, timeout, env)
    monkeypatch.setattr(za, "run", variant_run)
    calls.clear()
    off = {"L2PERSIST_READY_AHEAD": "0"}
    rows = za.placebo("decode_big", 9, 55, str(tmp_path), rounds=2,
                      variants=[("placebo", (), {}), ("events", ("--replay-events",), {}),
                                ("after_sync", (), off)])
    assert calls == ["plain", "placebo", "placebo", "placebo"] + ["placebo"] * 3 + ["plain"]
    assert flagged == [(False, {}), (True, {}), (False, off), (False, off), (True, {}),
                       (False, {})]
    assert [x["variant"] for x in rows] == ["placebo", "events", "after_sync"]
    assert rows[0]["plain_loop_s"] == rows[1]["plain_loop_s"] == [60.0, 60.0]
    # each run's readying ahead, from its watcher's figures
    assert rows[0]["ahead"] == [(40, 36, 2.9, 0.4)] * 2 and rows[2]["ahead"][0][0] == 0
    assert rows[1]["rests"] == [(50, 7)] * 2      # each run's rests, and those at their cap
    # each run's verdict: a placebo's "helps" is a false positive, kept to be seen
    assert rows[0]["helps"] == [False, False] and rows[2]["helps"] == [True, True]
    # --control: the plain program under observing-parts' context mode (no watcher, no
    # --json), in the same rounds; its row has the loops and nothing of a watcher's
    ran = []

    def control_run(cmd, timeout, env=None):
        ran.append(cmd)
        return fake_run(cmd, timeout, env)
    monkeypatch.setattr(za, "run", control_run)
    rows = za.placebo("decode_big", 9, 55, str(tmp_path), rounds=1,
                      variants=[("placebo", (), {}), (za.CONTROL, (), {})])
    control = [c for c in ran if "--child" in c]
    assert len(control) == 1 and control[0][2:5] == ["--child", "context", "--"]
    assert control[0][1].endswith("observing-parts") and "--placebo" not in control[0]
    assert control[0][5].endswith(".py") and "--iters" in control[0]
    assert rows[1]["variant"] == za.CONTROL and rows[1]["placebo_loop_s"] == [60.0]
    assert rows[1]["decision_s"] == [None] and rows[1]["same"] is True
    # --pads: round r's runs, plain, placebo and control alike, under the r-th pad (cycled;
    # 0: the program as it is), so each pair shares a layout
    ran.clear()
    rows = za.placebo("decode_big", 9, 55, str(tmp_path), rounds=3,
                      variants=[("placebo", (), {}), (za.CONTROL, (), {})], pads=[0, 16])
    assert rows[0]["pads_mib"] == [0, 16, 0]
    child = [c[c.index("--child") + 1] if "--child" in c else None for c in ran]
    # round 0 forward (plain, placebo, control), round 1 backward, round 2 forward
    assert child == [None, None, "context", "pad16", "pad16", "pad16", None, None, "context"]
    padded = ran[4]                                      # round 1's placebo, under the pad
    inner = padded[padded.index("--", padded.index("--json")) + 1:]
    assert "--placebo" in padded and inner[1].endswith("observing-parts")
    assert inner[2:5] == ["--child", "pad16", "--"] and inner[5].endswith(".py")
    assert za.placebo("decode_big", 9, 55, str(tmp_path), rounds=1)[0]["pads_mib"] is None


@pytest.mark.parametrize("pads, ok", [("0,2,64", [0, 2, 64]), ("16", [16]), ("", None),
                                      ("2,x", None), ("-2", None), ("5000", None)])
def test_zoo_advise_pads_are_whole_mib_and_need_placebo(monkeypatch, tmp_path, pads, ok):
    """--pads: whole MiB from 0 to 4096, comma-separated, passed to the placebo rounds; a bad
    list, --pads without --placebo, or a two-rank program is refused by name (exit 2)."""
    za = tool_script.load("tools/investigations/zoo-advise")
    asked = []
    monkeypatch.setattr(za, "placebo", lambda name, iters, budget, tmp, rounds, variants,
                        pads=(): asked.append(pads) or [])
    monkeypatch.setenv("OUT", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["zoo-advise", "--placebo", "--pads", pads,
                                      "decode_big:9"])
    if ok is None:
        with pytest.raises(SystemExit) as e:
            za.main()
        assert e.value.code == 2 and not asked
        return
    za.main()
    assert asked == [ok]
    for argv in (["--pads", pads, "decode_big:9"], ["--placebo", "--pads", pads, "ddp:9"]):
        monkeypatch.setattr(sys, "argv", ["zoo-advise", *argv])
        with pytest.raises(SystemExit) as e:
            za.main()
        assert e.value.code == 2 and asked == [ok]


def test_zoo_advise_placebo_flags_make_their_variants(monkeypatch, tmp_path):
    """--after-sync, --no-windows, --warmup-records, --full-probe, --keep-cupti and
    --max-overhead each add a placebo variant with its environment (the readying after the
    synchronization; no window anywhere; the records on through the warm-up; the probe's whole
    length; events with CUPTI kept after the probe; a tighter pace), after the plain
    placebo."""
    za = tool_script.load("tools/investigations/zoo-advise")
    asked = []
    monkeypatch.setattr(za, "placebo", lambda name, iters, budget, tmp, rounds, variants,
                        pads=(): asked.append((name, iters, rounds, variants)) or [])
    monkeypatch.setenv("OUT", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["zoo-advise", "--placebo", "--rounds", "2",
                                      "--after-sync", "--no-windows", "--warmup-records",
                                      "--full-probe", "--keep-cupti", "--control",
                                      "--max-overhead", "0.25", "eager_implicit:900"])
    za.main()
    (name, iters, rounds, variants), = asked
    assert (name, iters, rounds) == ("eager_implicit", 900, 2)
    assert variants == [("placebo", (), {}), ("after_sync", (), {"L2PERSIST_READY_AHEAD": "0"}),
                        ("no_windows", (), {"L2PERSIST_PLACEBO_WINDOWS": "0"}),
                        ("warmup_records", (), {"L2PERSIST_WARMUP_RECORDS": "1"}),
                        ("full_probe", (), {"L2PERSIST_FULL_PROBE": "1"}),
                        ("control_context", (), {}),
                        ("events_keep_cupti", ("--replay-events",),
                         {"L2PERSIST_KEEP_CUPTI": "1"}),
                        ("pace_0.25pct", ("--max-overhead", "0.25"), {})]
    assert json.loads((tmp_path / "zoo-placebo.json").read_text())["rows"] == []
    # without --placebo they would be ignored: refused by name instead
    monkeypatch.setattr(sys, "argv", ["zoo-advise", "--no-windows", "eager_implicit:900"])
    with pytest.raises(SystemExit) as e:
        za.main()
    assert e.value.code == 2 and asked == [(name, iters, rounds, variants)]
    monkeypatch.setattr(sys, "argv", ["zoo-advise", "--max-overhead", "0.2", "eager_implicit:9"])
    with pytest.raises(SystemExit) as e:
        za.main()
    assert e.value.code == 2 and len(asked) == 1
    # --variant NAME=FLAGS: advise's flags together, split as a shell would
    monkeypatch.setattr(sys, "argv", ["zoo-advise", "--placebo", "--variant",
                                      "events_tight=--replay-events --max-overhead 0.25",
                                      "decode_big:9"])
    za.main()
    assert asked[-1][3] == [("placebo", (), {}), ("events_tight", ("--replay-events",
                                                                   "--max-overhead", "0.25"), {})]
    for bad in ("events", "=--replay-events", "a b=--x", "x=", "x=  "):
        monkeypatch.setattr(sys, "argv", ["zoo-advise", "--placebo", "--variant", bad, "d:9"])
        with pytest.raises(SystemExit) as e:
            za.main()
        assert e.value.code == 2 and len(asked) == 2
    monkeypatch.setattr(sys, "argv", ["zoo-advise", "--variant", "x=--replay-events", "d:9"])
    with pytest.raises(SystemExit):
        za.main()
    assert len(asked) == 2


def test_zoo_advise_starts_two_ranks_as_the_study_does(monkeypatch, tmp_path):
    """tools/investigations/zoo-advise (its runs faked) starts `ddp` under torchrun, compares
    the digests rank by rank, and keeps the watcher's split of observing (the hooks, the
    replays and syncs that only counted, the rests at their cap) and what else the advise loop
    held (the arms tried, the search's share, CUPTI after the decision)."""
    import json as _json
    za = tool_script.load("tools/investigations/zoo-advise")
    cmds = []
    rank1 = {"plain": 7, "advise": 7}

    def fake_run(cmd, timeout, env=None):
        cmds.append(cmd)
        out = cmd[cmd.index("--iters") - 1]
        tag = "advise" if "advise" in cmd else "plain"
        for r in range(2):
            with open(f"{out}.rank{r}", "w") as f:
                _json.dump({"digest": rank1[tag] if r else 1}, f)
        if "--json" in cmd:
            with open(cmd[cmd.index("--json") + 1], "w") as f:
                _json.dump({"decision_s": 9.0, "cupti": {"now": "attached"}, "watching": {
                    "observing_share": 0.011, "hooks_share": 0.006, "hook_calls": 900,
                    "fast_calls": 800, "fast_us_per_call": 0.3, "rests_capped": 60,
                    "max_rest_ratio": 24.0, "exploring_share": 0.004}}, f)
        secs = 18.0 if tag == "advise" else 16.0
        return types.SimpleNamespace(returncode=0,
                                     stderr=f"loop: 9 iterations in {secs} s\n"), 1
    monkeypatch.setattr(za, "run", fake_run)
    r = za.one("ddp", 9, 30, str(tmp_path), verify=False)
    assert "torch.distributed.run" in cmds[0] and "--nproc-per-node" in cmds[0]
    assert cmds[1][cmds[1].index("--") + 1:][:4] == cmds[0][:4]
    assert r["same_advise"] is True and r["observing"] == 0.011
    assert (r["hooks_share"], r["hook_calls"], r["fast_calls"]) == (0.006, 900, 800)
    assert (r["rests_capped"], r["max_rest_ratio"]) == (60, 24.0)    # the pace at its cap
    assert (r["plain_loop_s"], r["advise_loop_s"]) == (16.0, 18.0)
    # what the advise loop holds beside observing: its ratio to the plain one, the search's
    # share of it, the arms tried, CUPTI after the decision
    assert r["loop_ratio"] == pytest.approx(1.125) and r["search_share_of_loop"] == 0.5
    assert (r["exploring_share"], r["cupti_after"]) == (0.004, "attached")
    rank1["advise"] = 8            # one rank's output differs: not the same
    assert za.one("ddp", 9, 30, str(tmp_path), verify=False)["same_advise"] is False


def test_instantiate_in_flight_tells_a_wait_from_none():
    """tools/investigations/instantiate-in-flight (its rounds made up): the verdict comes from
    whether the re-instantiations behind a busy GPU returned with the GPU still busy; the
    medians are per case."""
    t = tool_script.load("tools/investigations/instantiate-in-flight")

    def rows(behind_ms, behind_busy, control_busy=True):
        out = []
        for r in range(3):
            out += [{"round": r, "case": "idle", "instantiate_ms": 1.5 + r / 10,
                     "gpu_busy_after": False},
                    {"round": r, "case": "behind", "instantiate_ms": behind_ms,
                     "gpu_busy_after": behind_busy[r]},
                    {"round": r, "case": "busy-other", "instantiate_ms": 1.7,
                     "gpu_busy_after": control_busy}]
        return out
    waited = t.summary(rows(20.3, [False, False, True]))
    assert waited["waited"] is True
    assert waited["idle"]["instantiate_ms_median"] == pytest.approx(1.6)
    assert waited["behind"]["busy_after_share"] == pytest.approx(1 / 3)
    assert waited["busy-other"]["busy_after_share"] == 1.0
    assert t.summary(rows(1.6, [True, True, False]))["waited"] is False
    # the control idle too (the sleep too short): no verdict either way
    assert t.summary(rows(20.3, [False, False, False], control_busy=False))["waited"] is None


def test_instantiate_in_flight_without_a_gpu_exits_2(capsys):
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is here: the tool would measure (it runs in the GPU calls)")
    except ImportError:
        pass
    t = tool_script.load("tools/investigations/instantiate-in-flight")
    assert t.main(["--rounds", "1"]) == 2
    assert "needs PyTorch with a GPU" in capsys.readouterr().out


def test_observing_parts_alternates_modes_and_compares_with_plain(monkeypatch, tmp_path):
    """tools/investigations/observing-parts (no GPU: its runs faked): every mode runs once a
    round, in the order given and then reversed (a drift within a round moves the last modes
    one way, then the other), the loops come from the programs' `loop:` lines, each mode's
    median is set against plain's, and a failed run counts as no loop."""
    op = tool_script.load("tools/investigations/observing-parts")
    secs = {"plain": iter([10.0, 10.4]), "clock": iter([11.0, 11.2]), "placebo": iter([0, 13.0])}
    seen = []

    def fake_run(cmd, timeout, mode):
        assert mode == ("placebo" if "--placebo" in cmd else cmd[cmd.index("--child") + 1])
        seen.append(mode)
        s = next(secs[mode])
        if s:
            (tmp_path / "o").write_text('{"digest": "d"}')
        return types.SimpleNamespace(returncode=0 if s else 1,
                                     stderr=f"loop: 5 iterations in {s} s\n" if s else "boom")
    monkeypatch.setattr(op, "run", fake_run)
    r = op.measure("eager_implicit", 5, ["plain", "clock", "placebo"], 2, str(tmp_path / "o"))
    assert seen == ["plain", "clock", "placebo", "placebo", "clock", "plain"]
    assert r["same_outputs"] is False       # the failed placebo run wrote no digest
    assert r["loop_s"]["placebo"] == [None, 13.0]
    assert r["ratio_to_plain"]["clock"] == pytest.approx(11.1 / 10.2)
    assert r["ratio_to_plain"]["placebo"] == pytest.approx(13.0 / 10.2)
    assert r["plain_spread"] == pytest.approx(0.4 / 10.2)
    # the placebo runs the CLI; the other modes run this tool's child around the program
    cmd = op.command("placebo", "eager_implicit", 5, "o.json")
    assert cmd[1:5] == ["-m", "l2persist", "advise", "--placebo"] and "--iters" in cmd
    assert op.command("clock", "eager_implicit", 5, "o.json")[2:4] == ["--child", "clock"]
    # events: the placebo timed by events, around the program, or around the padN child
    ev = op.command("events", "eager_implicit", 5, "o.json")
    assert ev[1:6] == ["-m", "l2persist", "advise", "--placebo", "--replay-events"]
    assert "--child" not in ev and ev[ev.index("--") + 1] == sys.executable
    evp = op.command("events_pad16", "eager_implicit", 5, "o.json")
    inner = evp[evp.index("--") + 1:]
    assert inner[1].endswith("observing-parts") and inner[2:5] == ["--child", "pad16", "--"]
    assert inner[5:] == cmd[cmd.index("--") + 2:]      # the same program and arguments


def test_observing_parts_sets_each_events_run_against_its_own_layout(monkeypatch, tmp_path,
                                                                     capsys):
    """events_padN is set against padN and events against plain (the same layout perturbation
    on both sides), printed with their median; a pad without its events run pairs nothing."""
    op = tool_script.load("tools/investigations/observing-parts")
    secs = {"plain": 10.0, "events": 10.3, "pad2": 10.1, "events_pad2": 10.2, "pad64": 10.4}

    def fake_run(cmd, timeout, mode):
        (tmp_path / "o").write_text('{"digest": "d"}')
        return types.SimpleNamespace(returncode=0,
                                     stderr=f"loop: 5 iterations in {secs[mode]} s\n")
    monkeypatch.setattr(op, "run", fake_run)
    r = op.measure("decode_big", 5, list(secs), 1, str(tmp_path / "o"))
    assert r["layout_matched"] == {"events": pytest.approx(1.03),
                                   "events_pad2": pytest.approx(10.2 / 10.1)}
    monkeypatch.setenv("OUT", str(tmp_path))
    assert op.main(["--rounds", "1", "--modes", ",".join(secs), "decode_big:5"]) == 0
    out = capsys.readouterr().out
    assert "the watcher over the same layout: events 1.0300, events_pad2 1.0099; median " \
           "1.0200" in out


def test_observing_parts_reads_what_each_tracker_counted_and_runs_the_interposer(monkeypatch,
                                                                                 tmp_path):
    """The interposed modes run the program with capture-interpose's library preloaded (its
    report on); each run's counts are read from stderr: the library's line per process that
    reached the driver, and the core's CUPTI counts the child printed; digests are compared
    across every run."""
    op = tool_script.load("tools/investigations/observing-parts")
    monkeypatch.setattr(op, "interpose_lib", lambda: "/x/l2p-interpose.so")
    envs = []

    def fake_subprocess_run(cmd, **kw):
        envs.append(kw.get("env"))
        (tmp_path / "o").write_text('{"digest": "same"}')
        err = "loop: 5 iterations in 2.0 s\n"
        if kw.get("env"):
            err += ("interpose: pid 41 begun 3 failed 1 ended 2 open 0 unmatched 0 wrapped 4 "
                    "unwrapped 0 full 0\ncupti captures: {\"begun\": 3, \"ended\": 2}\n")
        return types.SimpleNamespace(returncode=0, stderr=err)
    monkeypatch.setattr(op.subprocess, "run", fake_subprocess_run)
    r = op.measure("decode_big", 5, ["plain", "interposed_watch"], 1, str(tmp_path / "o"))
    assert envs[0] is None
    assert envs[1]["LD_PRELOAD"] == "/x/l2p-interpose.so"
    assert envs[1]["L2P_INTERPOSE_REPORT"] == "1"
    (run,) = r["captures"]["interposed_watch"]
    assert run["interpose"] == [{"pid": 41, "begun": 3, "failed": 1, "ended": 2, "open": 0,
                                 "unmatched": 0, "wrapped": 4, "unwrapped": 0, "full": 0}]
    assert run["cupti"] == {"begun": 3, "ended": 2}
    assert r["same_outputs"] is True and "plain" not in r["captures"]

    def no_digest_under_the_library(cmd, **kw):   # a run that ends well but writes nothing
        if not kw.get("env"):
            (tmp_path / "o").write_text('{"digest": "same"}')
        return types.SimpleNamespace(returncode=0, stderr="loop: 5 iterations in 2.0 s\n")
    monkeypatch.setattr(op.subprocess, "run", no_digest_under_the_library)
    r = op.measure("decode_big", 5, ["plain", "interposed"], 1, str(tmp_path / "o"))
    assert r["same_outputs"] is False         # not the plain run's file read again


def _cuda_h():
    return pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include" / "cuda.h"


@pytest.mark.skipif(shutil.which("gcc") is None or not _cuda_h().is_file(),
                    reason="needs gcc and the CUDA toolkit's cuda.h (linked.c)")
def test_capture_interposer_counts_every_way_a_capture_reaches_a_stand_in_driver(tmp_path):
    """tools/investigations/capture-interpose's library over a stand-in libcuda.so.1 (no GPU):
    every capture begun and ended through cuGetProcAddress (both default-stream flavours, asked
    for itself, its old ABI handing out the old begin), through dlsym on libcuda and on the
    process (the library's own exports, counted once), and by a library linked against libcuda
    (into a graph too), is counted once; a failed begin is counted failed, an invalidated
    capture ended, an end with nothing open nothing, and the calls' results pass through
    unchanged."""
    r = subprocess.run(["bash", str(INVESTIGATIONS / "capture-interpose" / "run"), "fake"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OUT": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    # six captures, then the linked library's two, its invalidated one (901) and its failed
    # begin (900, the legacy stream), then an end on a stream that was not capturing (906)
    assert got["rcs"] == [[0, 0]] * 6 + [[0, 901, 900], 906]
    assert got["counts"] == {"begun": 10, "failed": 1, "ended": 9, "open": 0, "unmatched": 0,
                             "wrapped": 8, "unwrapped": 0, "full": 0}


def test_observing_parts_late_modes_set_their_part_up_at_the_first_replay_only(monkeypatch,
                                                                               capsys):
    """The *_late modes begin their part at the program's first CUDAGraph.replay (after a
    program that captures first made its graphs): once, before that replay, and the class's
    own replay is back from then on (a fake torch: no GPU). The set-up falls inside the
    program's loop: it is timed and printed, and the loop is read less it."""
    op = tool_script.load("tools/investigations/observing-parts")
    calls = []

    class Graph:
        def replay(self, n):
            calls.append(("replay", n))
            return n
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(CUDAGraph=Graph))
    monkeypatch.setitem(sys.modules, "torch", fake)
    own = Graph.replay
    op._at_first_replay(lambda: calls.append("part"))
    assert Graph.replay is not own
    g = Graph()
    assert g.replay(1) == 1 and g.replay(2) == 2
    assert calls == ["part", ("replay", 1), ("replay", 2)]
    assert Graph.replay is own
    err = capsys.readouterr().err
    assert len(re.findall(r"^late setup: [0-9.]+ s$", err, re.M)) == 1, err
    assert op.loop_s("late setup: 0.250000 s\nloop: 5 iterations in 6.5 s\n") == \
        pytest.approx(6.25)
    assert op.loop_s("loop: 5 iterations in 6.5 s\n") == pytest.approx(6.5)
    assert op.loop_s("boom") is None


def _kept_graph_class(calls, replay_entry):
    """A stand-in torch.cuda.CUDAGraph that notes keep_graph (patch_keep_graph passes True) and
    appends replay_entry(graph) to calls at each replay, ("instantiate", kept) at each
    instantiate()."""
    class Graph:
        def __new__(cls, keep_graph=False):
            g = object.__new__(cls)
            g.kept = keep_graph
            return g

        def __init__(self, keep_graph=False):
            pass

        def replay(self):
            calls.append(replay_entry(self))

        def instantiate(self):
            calls.append(("instantiate", self.kept))
    return Graph


def test_observing_parts_letgo_late_lets_cupti_go_after_its_replays_and_renews_the_graphs(
        monkeypatch, capsys):
    """letgo_late (a fake torch and core: no GPU): graphs keep their raw graph; records begin at
    the first replay; after LETGO_REPLAYS replays the device is synchronized, the records
    end, CUPTI is let go and carried out by a synchronization, every graph replayed so far is
    instantiated again, once, and the class's own replay is back from then on."""
    op = tool_script.load("tools/investigations/observing-parts")
    monkeypatch.setattr(op, "LETGO_REPLAYS", 3)
    calls = []

    Graph = _kept_graph_class(calls, lambda g: "replay")
    cuda = types.SimpleNamespace(CUDAGraph=Graph, synchronize=lambda: calls.append("sync"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    from l2persist import _core
    for name, fn in {"activity_begin": lambda d: calls.append("begin"),
                     "activity_end": lambda: calls.append("end"),
                     "cupti_release": lambda: calls.append("release") or ("releasing", None),
                     "cupti_state": lambda: "released"}.items():
        monkeypatch.setattr(_core, name, fn)
    own = Graph.replay
    op._letgo_late()
    a, b = Graph(), Graph()
    assert a.kept is True                   # keep_graph=True whatever the program passed
    for g in (a, b, a):
        g.replay()
    assert calls == ["begin", "replay", "replay", "replay"]
    del calls[:]
    b.replay()                              # the fourth: the let-go, then the replay itself
    assert calls == ["sync", "end", "release", "sync", ("instantiate", True),
                     ("instantiate", True), "replay"]
    assert Graph.replay is own
    err = capsys.readouterr().err
    assert len(re.findall(r"^late setup: [0-9.]+ s$", err, re.M)) == 1, err
    assert "let go: release releasing (None), now released, 2 graphs made again" in err


def test_observing_parts_cleared_sets_and_disables_a_window_once_per_graph(monkeypatch,
                                                                          capsys):
    """cleared (a fake torch, fake borrowed graphs: no GPU): graphs keep their raw graph; at
    each graph's first replay, and only then, a window goes on every kernel node, is disabled,
    and the graph is instantiated again, before that replay; each set-up is printed and the
    loop is read less all of them."""
    op = tool_script.load("tools/investigations/observing-parts")
    calls = []

    Graph = _kept_graph_class(calls, lambda g: ("replay", id(g)))

    class Borrowed:
        kernel_nodes = [1, 2, 3]

        def __init__(self, owner):
            self.owner = owner

        def set_access_policy_window(self, window, nodes=None):
            assert nodes is None               # every kernel node
            calls.append(("window", id(self.owner),
                          None if window is None else window.num_bytes))

    class Tensor:
        def data_ptr(self):
            return 1 << 30
    cuda = types.SimpleNamespace(CUDAGraph=Graph)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        cuda=cuda, empty=lambda *a, **k: Tensor(), uint8="uint8"))
    from l2persist.process import torch as ptorch
    monkeypatch.setattr(ptorch, "borrow", lambda owner, quiet=False: Borrowed(owner))
    monkeypatch.setattr(ptorch, "reinstantiate",
                        lambda owner: calls.append(("instantiate", id(owner))) or True)
    from l2persist import _core
    monkeypatch.setattr(_core, "AccessPolicyWindow",
                        lambda target, n, **k: types.SimpleNamespace(num_bytes=n, **k))
    op._cleared()
    a, b = Graph(), Graph()
    assert a.kept is True
    for g in (a, a, b, a, b):
        g.replay()
    ia, ib = id(a), id(b)
    assert calls == [("window", ia, 1 << 20), ("window", ia, None), ("instantiate", ia),
                     ("replay", ia), ("replay", ia),
                     ("window", ib, 1 << 20), ("window", ib, None), ("instantiate", ib),
                     ("replay", ib), ("replay", ia), ("replay", ib)]
    err = capsys.readouterr().err
    assert len(re.findall(r"^late setup: [0-9.]+ s$", err, re.M)) == 2, err
    assert err.count("cleared: 3 kernel nodes") == 2
    assert op.loop_s("late setup: 0.25 s\nlate setup: 0.5 s\nloop: 5 iterations in 6.5 s\n") \
        == pytest.approx(5.75)


def test_observing_parts_pad_modes_allocate_their_mib_before_the_program(monkeypatch, tmp_path):
    """padN: the context made, then N MiB allocated and kept before the program runs (a fake
    torch: no GPU); N is any number, and only padN names are taken beside the listed modes."""
    op = tool_script.load("tools/investigations/observing-parts")
    made = []
    fake = types.SimpleNamespace(
        zeros=lambda *a, **k: made.append(("zeros", a)),
        empty=lambda n, **k: made.append(("empty", n)) or ("tensor", n),
        uint8="uint8", cuda=types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setitem(sys.modules, "torch", fake)
    prog = tmp_path / "prog.py"
    monkeypatch.setattr(op.runpy, "run_path",
                        lambda path, run_name: made.append(("program", path)))
    op.child("pad24", [str(prog)])
    assert made == [("zeros", (1,)), ("empty", 24 << 20), ("program", str(prog))]
    assert op._PADS[-1] == ("tensor", 24 << 20)           # kept alive for the process
    assert op._PAD.match("pad2") and not op._PAD.match("padN") and not op._PAD.match("pad")
    with pytest.raises(SystemExit):
        op.main(["--modes", "plain,padx", "decode_big:10"])


@pytest.mark.parametrize("mode, setup", [("letgo_late", "_letgo_late"),
                                         ("aside_late", "_aside_late"),
                                         ("granule_late", "_granule_late"),
                                         ("cleared", "_cleared"), ("pad8", "_pad")])
def test_observing_parts_child_sets_each_mode_up_by_its_own_function(monkeypatch, mode, setup):
    """Each mode's child runs its own set-up, and only it, before the program (letgo_late and
    aside_late are not the capture_watch/cupti_paused late modes, whose names also end in
    _late)."""
    op = tool_script.load("tools/investigations/observing-parts")
    ran = []
    for name in ("_letgo_late", "_aside_late", "_granule_late", "_cleared", "_pad", "_context",
                 "_at_first_replay", "_paused"):
        monkeypatch.setattr(op, name, lambda *a, _n=name: ran.append(_n))
    monkeypatch.setattr(op.runpy, "run_path", lambda path, run_name: ran.append("program"))
    op.child(mode, ["prog.py"])
    assert ran == [setup, "program"]


def test_observing_parts_aside_late_resets_the_set_aside_at_the_first_replay(monkeypatch,
                                                                             capsys):
    """aside_late (a fake torch, device and core: no GPU): at the first replay, ASIDE_SWITCHES
    times a synchronization, the limit set back to the default where it reads otherwise, and
    the persisting lines reset; then the replay; nothing at later replays."""
    op = tool_script.load("tools/investigations/observing-parts")
    monkeypatch.setattr(op, "ASIDE_SWITCHES", 3)
    calls = []
    Graph = _kept_graph_class(calls, lambda g: "replay")
    cuda = types.SimpleNamespace(CUDAGraph=Graph, synchronize=lambda: calls.append("sync"),
                                 current_device=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))

    class Dev:
        default_persisting_l2_limit = 100
        limit = 7

        def __init__(self, index):
            assert index == 0

        @property
        def persisting_l2_limit(self):
            return Dev.limit

        @persisting_l2_limit.setter
        def persisting_l2_limit(self, v):
            calls.append(("limit", v))
            Dev.limit = v
    import l2persist
    from l2persist import _core
    monkeypatch.setattr(l2persist, "Device", Dev)
    monkeypatch.setattr(_core, "reset_persisting_l2", lambda dev: calls.append("reset"))
    op._aside_late()
    g = Graph()
    g.replay()
    g.replay()
    assert calls == ["sync", ("limit", 100), "reset", "sync", "reset", "sync", "reset",
                     "sync", "replay", "replay"]
    err = capsys.readouterr().err
    assert "aside: limit 7 before, 100 after (default 100), 3 resets" in err
    assert len(re.findall(r"^late setup: [0-9.]+ s$", err, re.M)) == 1


def test_observing_parts_granule_late_probes_the_step_once_at_the_first_replay(monkeypatch,
                                                                              capsys):
    """granule_late (a fake torch and device: no GPU): the set-aside's step is read through
    Device.persisting_l2_granule (the probe advise runs) once, before the first replay."""
    op = tool_script.load("tools/investigations/observing-parts")
    calls = []
    Graph = _kept_graph_class(calls, lambda g: "replay")
    cuda = types.SimpleNamespace(CUDAGraph=Graph, current_device=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))

    class Dev:
        persisting_l2_limit = 11796480

        def __init__(self, index):
            pass

        @property
        def persisting_l2_granule(self):
            calls.append("granule")
            return 3932160
    import l2persist
    monkeypatch.setattr(l2persist, "Device", Dev)
    op._granule_late()
    g = Graph()
    g.replay()
    g.replay()
    assert calls == ["granule", "replay", "replay"]
    assert "granule: 3932160 bytes; limit 11796480 before, 11796480 after" in \
        capsys.readouterr().err


def test_observing_parts_child_runs_the_program_as_main_after_its_part(tmp_path):
    """The child sets its mode's part up (here the clock thread: no GPU needed) and runs the
    program as __main__ with the program's own arguments; an unknown mode is refused."""
    prog = tmp_path / "prog.py"
    prog.write_text("import sys, threading\n"
                    "print('args', sys.argv[1:], 'threads', threading.active_count())\n")
    tool = str(INVESTIGATIONS / "observing-parts")
    p = subprocess.run([sys.executable, tool, "--child", "clock", "--", str(prog), "a", "--b"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "args ['a', '--b'] threads 2" in p.stdout, p.stderr
    p = subprocess.run([sys.executable, tool, "--child", "nope", "--", str(prog)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "no mode 'nope'" in p.stderr


def test_hook_cost_runs_both_modes_on_the_simulator(tmp_path):
    """tools/investigations/hook-cost (CPU only): one round of each mode and shape decides;
    with the hook's count a replay loop's search calls nearly all stay in the hook, without it
    none do; where a sync follows every replay none can, and arming backs off; the table and
    the JSON carry every shape's and mode's medians."""
    out = tmp_path / "hook.json"
    r = subprocess.run([sys.executable, str(INVESTIGATIONS / "hook-cost"), "--rounds", "1",
                        "--json", str(out)], capture_output=True, text=True, timeout=600,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    for row in ("| replays | watcher | 1 of 1 |", "| replays | fast | 1 of 1 |",
                "| replay+sync | watcher | 1 of 1 |", "| replay+sync | fast | 1 of 1 |"):
        assert row in r.stdout, r.stdout
    doc = json.loads(out.read_text())
    runs = {(x["shape"], x["mode"]): x for x in doc["runs"]}
    assert runs["replays", "watcher"]["fast_calls"] == 0
    assert runs["replays", "fast"]["fast_calls"] > 0.9 * runs["replays", "fast"]["hook_calls"]
    alt = runs["replay+sync", "fast"]
    assert alt["fast_calls"] == 0 and 0 < alt["arms"] < 0.02 * alt["steps"]
    assert set(doc["medians"]) == {"replays watcher", "replays fast", "replay+sync watcher",
                                   "replay+sync fast"}
    bad = subprocess.run([sys.executable, str(INVESTIGATIONS / "hook-cost"), "--rounds", "0"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert bad.returncode == 2 and "--rounds: at least 1" in bad.stderr
