"""Fixtures and markers of the flashattn2 tests.

- every test draws fresh random inputs from a new seed, printed so that a failure
  can be replayed;
- tests marked ``triton_kernels`` run the Triton kernels on CPU tensors, which
  only Triton's interpreter can do: CI sets ``TRITON_INTERPRET=1`` (hatch.toml);
  without it they are skipped with that reason.
"""

import random

import pytest
import torch

from flashattn2._triton_common import interpreting


def pytest_configure(config):
    config.addinivalue_line("markers", "triton_kernels: runs the Triton kernels on CPU (needs TRITON_INTERPRET=1)")


def pytest_collection_modifyitems(config, items):
    if interpreting():
        return
    skip = pytest.mark.skip(reason="the Triton kernels on CPU tensors need TRITON_INTERPRET=1")
    for item in items:
        if "triton_kernels" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def fresh_seed():
    seed = random.SystemRandom().randrange(2**63)
    print(f"torch.manual_seed({seed})")  # shown by pytest when the test fails
    torch.manual_seed(seed)
    return seed
