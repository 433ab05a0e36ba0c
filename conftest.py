"""Suite-wide pytest hooks: tests marked ``gpu`` are skipped where no CUDA GPU is visible."""

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (marker 'gpu')")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
