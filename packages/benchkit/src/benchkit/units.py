"""Units and names that every measurement shares: byte units and dtype names.

- :data:`MIB` and :data:`GIB` (2**20 and 2**30 bytes) for memory, as PyTorch's
  allocator statistics and ``nvidia-smi`` count it;
- :data:`GB` (10**9 bytes) for datasheet figures and bandwidths, as NVIDIA's and
  Google's datasheets and nccl-tests (``doc/PERFORMANCE.md``) give them;
- :data:`DTYPES`: the short dtype names that options, tables and JSON use.

Example::

    from benchkit.units import DTYPES, MIB, dtype_name

    DTYPES["bf16"]  # torch.bfloat16
    dtype_name(DTYPES["bf16"])  # "bf16"
    (2**30) / MIB  # 1024.0
"""

from __future__ import annotations

import torch

__all__ = ["DTYPES", "GB", "GIB", "MIB", "dtype_name"]

MIB = 2**20
GIB = 2**30
GB = 1e9

DTYPES: dict[str, torch.dtype] = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}
_NAMES = {dtype: name for name, dtype in DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    """The short name of ``dtype`` (``"fp32"``, ...), or PyTorch's own for a dtype not in :data:`DTYPES`."""
    return _NAMES.get(dtype, str(dtype))
