import numpy as np
import pytest
import torch


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _torch_threads():
    # one thread: reproducible timings and no OpenMP oversubscription on a shared 2-core machine
    torch.set_num_threads(1)
    yield
