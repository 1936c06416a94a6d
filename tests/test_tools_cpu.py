"""tools/: the GPU suite's parts cover every test file once, and the investigations' index names
each script there and only data files that exist (no GPU)."""

import os
import pathlib
import re
import shutil
import subprocess

import pytest

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
    assert set(listed.values()) == {"core", "live", "live-programs", "studies", "zoo-graphs", "zoo-libs", "notebooks"}
    here = {p.stem for p in (ROOT / "tests").glob("test_*.py")}
    assert set(listed) == here


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
    assert "no part named 'everything'" in r.stderr and "core live live-programs studies zoo-graphs zoo-libs notebooks" in r.stderr
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


def test_only_parts_shares_four_gpus_among_some_parts_and_names_a_wrong_one():
    """On a machine of four GPUs the seven parts take two calls: ONLY_PARTS picks each half."""
    r = _share(4, ONLY_PARTS="core live live-programs studies")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["core", "0", "live", "1", "live-programs", "2", "studies", "3"]
    r = _share(4, ONLY_PARTS="core nope")
    assert r.returncode == 2 and "no part named 'nope'" in r.stderr
    assert _share(4, ONLY_PARTS=" ".join(["core"] * 5)).returncode == 2     # 5 > 4 GPUs


@pytest.mark.parametrize("gpus", [7, 8, 15])
def test_part_all_gives_each_part_gpus_of_its_own(gpus):
    """PART=all (the whole suite in one call): every part once, each on its own GPUs, as many
    each as the machine has for all of them."""
    r = _share(gpus)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    names = [n for n, _ in rows]
    parts = [line.split(":", 1)[0] for line in _parts().stdout.splitlines()]
    assert names == parts
    devs = [int(d) for _, ds in rows for d in ds.split(",")]
    assert len(devs) == len(set(devs)) and max(devs) < gpus          # no GPU shared
    assert {len(ds.split(",")) for _, ds in rows} == {gpus // len(parts)}


def test_part_all_refuses_fewer_gpus_than_parts():
    r = _share(3)
    assert r.returncode == 2 and "needs a GPU per part" in r.stderr and "3 GPU(s)" in r.stderr


@pytest.mark.skipif(__import__("l2persist").is_available(),
                    reason="a GPU is here: the stand-in parts would open contexts on GPUs that "
                           "the real parts (PART=all) are using")
def test_part_all_runs_every_part_on_its_own_gpu_and_packs_one_archive(tmp_path):
    """PART=all end to end without a GPU: a stand-in nvidia-smi says eight GPUs and logs what
    each part asks it; each part runs (here a small CPU test file instead of its own files),
    queries its own GPU once, and the logs of all come back in one archive with a row each."""
    import tarfile
    shim = tmp_path / "bin"
    shim.mkdir()
    log = tmp_path / "smi.log"
    (shim / "nvidia-smi").write_text(
        "#!/bin/bash\n"
        f"echo \"$*\" >> {log}\n"
        "if [ \"$1\" = -L ]; then for i in 0 1 2 3 4 5 6 7; do echo \"GPU $i: Stand-in\"; done;"
        " exit 0; fi\n"
        "echo 'Stand-in GPU, 1.0, 1 MiB'\n")
    (shim / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}", PART="all", SKIP_BUILD="1",
               TESTS="tests/test_names_cpu.py", DEADLINE="240", OUT=str(out),
               SKIP_CTEST="1", SKIP_SANITIZER="1")
    r = subprocess.run(["bash", str(GPU_CHECK)], capture_output=True, text=True, timeout=300,
                       env=env, cwd=ROOT)
    parts = [line.split(":", 1)[0] for line in _parts().stdout.splitlines()]
    rows = [line for line in r.stdout.splitlines() if line.startswith("| ") and "|---" not in line]
    assert [row.split("|")[1].strip() for row in rows[1:len(parts) + 1]] == parts, r.stdout
    assert all("| passed |" in row for row in rows[1:len(parts) + 1]), r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    asked = sorted(line.split()[1] for line in log.read_text().splitlines()
                   if line.startswith("-i "))
    assert asked == sorted(str(i) for i in range(len(parts)))     # one GPU each, none twice
    with tarfile.open(out / "parts.tar.gz") as t:
        names = t.getnames()
    for p in parts:
        assert f"parts/{p}/work/logs/junit_1.xml" in names and f"parts/{p}.out" in names
    assert not any("pytest-tmp" in n for n in names)
