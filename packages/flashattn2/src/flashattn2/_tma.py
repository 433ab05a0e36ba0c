"""Host-side TMA descriptors for the Gluon kernels, built with little host time.

A Gluon kernel takes each tensor it reads or writes by TMA as a
``TensorDescriptor`` (``triton.experimental.gluon.nvidia.hopper``): the tensor
with its shape, strides, the block one copy moves and the shared-memory layout.
``TensorDescriptor.from_tensor`` checks all of these on every call (1-6 µs of
host time each, by the CPU), and a backward passes seven to nine of them.
Within a launch plan only the data pointer changes from call to call: the
plan's key holds the shapes, strides, dtype and 16-byte alignment. So
:class:`TmaDescriptor` checks once, on a plan's first call, and later calls
copy the checked fields with the new tensor.
"""

from __future__ import annotations

import torch
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor


class TmaDescriptor:
    """``describe(tensor) -> TensorDescriptor``: the descriptors of one kernel argument of one launch plan.

    Arguments:
        block_shape: the block one TMA copy moves, in elements (as many dimensions as the tensor).
        layout: its ``gl.NVMMASharedLayout`` in shared memory.

    Every tensor passed must have the shape, strides, dtype and 16-byte alignment of the first one, which
    ``TensorDescriptor.from_tensor`` checks; later calls take the checked fields and set only the tensor.
    """

    def __init__(self, block_shape: list[int], layout) -> None:
        self.block_shape, self.layout = block_shape, layout
        self.checked: dict | None = None  # the first descriptor's fields but its tensor (kept, it would stay alive)

    def __call__(self, tensor: torch.Tensor) -> TensorDescriptor:
        if self.checked is None:
            descriptor = TensorDescriptor.from_tensor(tensor, self.block_shape, self.layout)
            self.checked = {name: value for name, value in vars(descriptor).items() if name != "base"}
            return descriptor
        descriptor = object.__new__(TensorDescriptor)  # a dataclass: __init__ would check again
        vars(descriptor).update(self.checked, base=tensor)
        return descriptor

    def stand_in(self, dtype: torch.dtype, device: torch.device) -> TensorDescriptor:
        """A descriptor of a new tensor of one block (``dtype``, ``device``), for compiling a kernel ahead of its
        first call: Triton specializes a kernel on a descriptor's block shape, layout and dtype, not on its
        tensor's shape or strides. The checked fields are not touched."""
        block = torch.empty(self.block_shape, dtype=dtype, device=device)
        return TensorDescriptor.from_tensor(block, self.block_shape, self.layout)
