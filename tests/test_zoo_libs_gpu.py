"""The zoo on a GPU, third part: programs whose kernels come from other libraries
(transformers, CuPy, Triton, JAX) and the two-rank program (the check: tests/zoo_check.py).
With tests/test_zoo_graphs_gpu.py and tests/test_zoo_torch_gpu.py, every shape of ``live.ZOO_SHAPES`` once."""
import pytest

from l2persist.studies import live
from test_zoo_graphs_gpu import GRAPHS
from test_zoo_torch_gpu import TORCH
from zoo_check import check_program

pytestmark = pytest.mark.gpu

LIBS = tuple(n for n in live.ZOO_SHAPES if n not in GRAPHS + TORCH)


@pytest.mark.parametrize("name", LIBS)
def test_zoo_program_same_digest_plain_twice_and_under_advise(name, tmp_path):
    check_program(name, tmp_path)
