"""MPS: the set-aside is the MPS server's. Each test that needs MPS starts a private MPS
control daemon (its own pipe and log directories, so nothing else on the machine is touched),
runs tests/mps_client.py as its client, and quits the daemon. Skipped where
nvidia-cuda-mps-control is missing or cannot start."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import l2persist

pytestmark = pytest.mark.gpu
CLIENT = str(Path(__file__).with_name("mps_client.py"))
PCT_VAR = "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT"


def _client(env, *args, timeout=300):
    r = subprocess.run([sys.executable, CLIENT, *args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _plain_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    env.pop(PCT_VAR, None)
    env.update(extra)
    return env


@pytest.fixture
def mps_server(tmp_path):
    """Start a private MPS daemon with PCT_VAR=percent; yields a function giving its client
    environment; quits it afterwards."""
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        pytest.skip("nvidia-cuda-mps-control is not installed")
    started = []

    def start(percent):
        pipe, log = tmp_path / f"pipe{len(started)}", tmp_path / f"log{len(started)}"
        pipe.mkdir()
        log.mkdir()
        env = _plain_env(CUDA_MPS_PIPE_DIRECTORY=str(pipe), CUDA_MPS_LOG_DIRECTORY=str(log))
        daemon_env = dict(env)
        if percent is not None:
            daemon_env[PCT_VAR] = str(percent)
        # The daemon serves the visible devices (pytest --l2p-gpu N sets them); its clients see
        # them renumbered from 0 and must not filter again (the MPS guide says so).
        env.pop("CUDA_VISIBLE_DEVICES", None)
        r = subprocess.run([control, "-d"], env=daemon_env, capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            pytest.skip(f"the MPS control daemon did not start: {r.stderr.strip()}")
        started.append(env)
        return env

    yield start
    for env in started:
        subprocess.run([control], input="quit\n", env=env, text=True, timeout=30)
    time.sleep(1)  # the server exits after its clients have


def test_outside_mps_the_process_decides(device):
    assert device.mps is False
    assert device.persisting_l2_source == "process"
    assert device.mps_server_percentage is None


def test_mps_client_gets_the_servers_set_aside(mps_server, device):
    # The driver's own rule for a percentage: what a plain process with the variable reads.
    expected = _client(_plain_env(**{PCT_VAR: "25"}))["limit"]
    got = _client(mps_server(25), "--set")
    assert got["mps"] is True and got["source"] == "mps-server"
    assert got["percentage"] == 25.0
    assert got["limit"] == got["default"] == expected > 0
    # Asking for another set-aside is refused with the reason and the way out; asking for the
    # server's own is a no-op.
    msg = got["set_other"]
    assert "MPS" in msg and PCT_VAR in msg and "requested" in msg
    assert got["limit_after"] == expected
    rep = got["report"]
    assert rep["mps"] is True and rep["persisting_l2_source"] == "mps-server"
    assert rep["mps_server_percentage"] == 25.0 and rep["persisting_l2_limit"] == expected
    # This process is no MPS client: its own view is unchanged.
    assert device.mps is False


def test_mps_server_without_the_variable_gives_the_default(mps_server):
    plain = _client(_plain_env())["limit"]
    got = _client(mps_server(None))
    assert got["mps"] is True and got["source"] == "mps-server"
    assert got["percentage"] is None and got["limit"] == plain


def test_window_under_mps_acts_like_the_servers_set_aside(mps_server, device):
    """A window still changes the hot/cold traffic under MPS, by as much as it does for a
    plain process whose limit is the server's set-aside: that is what the client gets."""
    if not l2persist.counters_available()[0]:
        pytest.skip(l2persist.counters_available()[1])
    mps = _client(mps_server(25), "--effect", "--tune")
    plain = _client(_plain_env(), "--limit", str(mps["limit"]), "--effect")
    m, p = mps["effect"], plain["effect"]
    print("\nMPS:", json.dumps(m["none"]), json.dumps(m["window"]),
          "\nplain:", json.dumps(p["none"]), json.dumps(p["window"]), "\n" + m["tune"]["table"])
    # The window moves the L2 read hit rate (H100: MPS 0.563 -> 0.615, plain 0.562 -> 0.636);
    # the DRAM bytes read hardly move (-0.1 %) in either process, so they are compared between
    # the two, not with no window.
    gain_mps = m["window"]["l2_read_hit_rate"] - m["none"]["l2_read_hit_rate"]
    gain_plain = p["window"]["l2_read_hit_rate"] - p["none"]["l2_read_hit_rate"]
    assert gain_mps > 0.02 and gain_plain > 0.02
    assert gain_mps >= 0.5 * gain_plain
    assert m["window"]["dram_bytes_read"] == pytest.approx(p["window"]["dram_bytes_read"],
                                                           rel=0.05)
    # tune keeps the server's set-aside in every trial and says so.
    t = m["tune"]
    assert t["mps_set_aside"] == mps["limit"]
    assert t["levels"] == [mps["limit"]] and t["trial_set_asides"] == [mps["limit"]]
    assert "under MPS" in t["verdict"]


def test_percentage_beyond_the_maximum_is_explained(device):
    p = device.properties
    pct = int(100 * p.persisting_l2_cache_max_size / p.l2_cache_size) + 5
    if pct > 100:
        pytest.skip("the persisting maximum is the whole L2")
    env = _plain_env(**{PCT_VAR: str(pct)})
    r = subprocess.run([sys.executable, "-c", "import l2persist; l2persist.Device(0)"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "NoDeviceError" in r.stderr and PCT_VAR in r.stderr and "lower it" in r.stderr
