"""The suite's host_timed marker (tests/host_timed.py), run on a planted test file: a marked
test that fails once passes on its next try with the failed try in its report; a marked test
wrong every time fails after three tries; an unmarked test, and a marked one whose fixture
fails, get one try; the tries taken are in the JUnit XML."""

PLANTED = '''
import pathlib
import pytest

HERE = pathlib.Path(__file__).parent


def tries(name):
    path = HERE / name
    n = int(path.read_text()) if path.exists() else 0
    path.write_text(str(n + 1))
    return n + 1


@pytest.fixture
def fresh():
    return []                           # function scope: a new one each try


@pytest.mark.host_timed
def test_wrong_once(fresh):
    fresh.append(1)
    assert fresh == [1]
    assert tries("once") > 1, "the first try reads too slow"


@pytest.mark.host_timed
def test_wrong_always():
    tries("always")
    assert False, "wrong every time"


def test_unmarked_wrong_once():
    assert tries("unmarked") > 1, "unmarked: one try"


@pytest.fixture
def broken():
    tries("setup")
    raise RuntimeError("a fixture that cannot be made")


@pytest.mark.host_timed
def test_setup_fails(broken):
    pass
'''


def test_host_timed_tests_get_three_tries(pytester):
    pytester.makepyfile(test_planted=PLANTED)
    result = pytester.runpytest("-p", "host_timed", "-p", "no:randomly", "-rA",
                                "--junitxml=out.xml")
    result.assert_outcomes(passed=1, failed=2, errors=1)
    read = lambda name: int((pytester.path / name).read_text())     # noqa: E731
    assert (read("once"), read("always"), read("unmarked"), read("setup")) == (2, 3, 1, 1)
    out = result.stdout.str()
    assert "try 1 of 3 failed" in out and "the first try reads too slow" in out
    assert "wrong every time" in out and "unmarked: one try" in out
    result.stdout.fnmatch_lines(["FAILED *test_wrong_always*",
                                 "FAILED *test_unmarked_wrong_once*"], consecutive=False)
    # the tries a marked test took, in the JUnit XML
    import xml.etree.ElementTree as ET
    tries = {c.get("name"): p.get("value")
             for c in ET.parse(pytester.path / "out.xml").getroot().iter("testcase")
             for p in c.iter("property") if p.get("name") == "host_timed_tries"}
    assert tries == {"test_wrong_once": "2", "test_wrong_always": "3",
                     "test_setup_fails": "1"}, tries
