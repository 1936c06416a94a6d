"""The zoo on a GPU, first half: the PyTorch programs that replay CUDA graphs or run eager
work on a pool stream (the check: tests/zoo_check.py)."""
import pytest

from zoo_check import check_program

pytestmark = pytest.mark.gpu

GRAPHS = ("server_mix", "decode_big", "compile_graphs", "eager_implicit", "train_fused")


@pytest.mark.parametrize("name", GRAPHS)
def test_zoo_program_same_digest_plain_twice_and_under_advise(name, tmp_path):
    check_program(name, tmp_path)
