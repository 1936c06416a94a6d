"""The zoo on a GPU, second part: PyTorch programs whose graphs PyTorch makes for them
(``torch.compile(mode="reduce-overhead")``) or that run eager work on a pool stream with only
implicit syncs (the check: tests/zoo_check.py)."""
import pytest

from zoo_check import check_program

pytestmark = pytest.mark.gpu

TORCH = ("compile_graphs", "eager_implicit")


@pytest.mark.parametrize("name", TORCH)
def test_zoo_program_same_digest_plain_twice_and_under_advise(name, tmp_path):
    check_program(name, tmp_path)
