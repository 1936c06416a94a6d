"""The zoo on a GPU, first part: the PyTorch programs that replay CUDA graphs they captured
themselves (the check: tests/zoo_check.py). The part zoo-torch has PyTorch's other shapes;
the three files were two until zoo-graphs came within 5 s of its call's deadline (H200,
de7579c: 475 s of pytest)."""
import pytest

from zoo_check import check_program

pytestmark = pytest.mark.gpu

GRAPHS = ("server_mix", "decode_big", "train_fused")


@pytest.mark.parametrize("name", GRAPHS)
def test_zoo_program_same_digest_plain_twice_and_under_advise(name, tmp_path):
    check_program(name, tmp_path)
