"""The launchers' plumbing: ``TunedLaunch`` (the autotuner runs once per key, later
launches use its choice directly) and the guard for the kernels' 32-bit offsets."""

import pytest
import torch
import triton

from flashattn2._triton_common import TunedLaunch, within_int32_offsets


class _RecordingKernel:
    """Stands in for a ``triton.autotune`` kernel: records how it was launched."""

    def __init__(self, best_config):
        self.best_config = best_config
        self.launches = []
        self.fn = self._Direct(self.launches)

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append(("autotuner", grid, args, kwargs))

    class _Direct:
        def __init__(self, launches):
            self.launches = launches

        def __getitem__(self, grid):
            return lambda *args, **kwargs: self.launches.append(("direct", grid, args, kwargs))


def test_first_launch_per_key_goes_through_the_autotuner_later_ones_use_its_choice():
    config = triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=8, num_stages=3)
    kernel = _RecordingKernel(config)
    launch = TunedLaunch(kernel)
    grid = (4, 2)
    launch(("key", 1), grid, "x", 7, HEAD_DIM=16)
    launch(("key", 1), grid, "x", 7, HEAD_DIM=16)
    launch(("key", 2), grid, "y", 8, HEAD_DIM=32)
    launch.forget()
    launch(("key", 1), grid, "x", 7, HEAD_DIM=16)

    assert [how for how, *_ in kernel.launches] == ["autotuner", "direct", "autotuner", "autotuner"]
    _, direct_grid, args, kwargs = kernel.launches[1]
    assert direct_grid == grid and args == ("x", 7)
    assert kwargs == {"HEAD_DIM": 16, **config.all_kwargs()}  # what triton.autotune passes to its kernel
    assert kwargs["BLOCK_M"] == 64 and kwargs["num_warps"] == 8


def test_views_whose_offsets_overflow_int32_are_copied():
    # Meta tensors: the layouts of multi-GiB tensors, without their memory.
    packed = torch.empty_strided((1, 2, 3, 16), (0, 16, 2**20, 1), device="meta")
    assert within_int32_offsets(packed, "q") is packed  # last row at 2 * 2**20: fine as it is
    wide = torch.empty_strided((1, 2, 3, 16), (0, 16, 2**30 + 64, 1), device="meta")
    copied = within_int32_offsets(wide, "k")  # last row past 2**31
    assert copied.is_contiguous() and copied.shape == wide.shape
    largest = torch.empty((1, 1, 2**24, 128), device="meta")  # N * D = 2**31: the last offset fits
    assert within_int32_offsets(largest, "v") is largest
    too_long = torch.empty((1, 1, 2**24 + 1, 128), device="meta")
    with pytest.raises(ValueError, match=r"v has 16777217 x 128 elements per \(batch, head\)"):
        within_int32_offsets(too_long, "v")
