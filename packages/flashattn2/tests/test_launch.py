"""``TunedLaunch``: the autotuner runs once per key, later launches use its choice directly."""

import triton

from flashattn2._triton_common import TunedLaunch


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
