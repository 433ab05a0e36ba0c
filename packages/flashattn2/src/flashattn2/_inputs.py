"""Checks on the arguments of every public entry point, and the (B, H, N, D) view the kernels take.

Bad input raises a ``TypeError`` or ``ValueError`` that names the argument and the
expected form, before any kernel runs: never a wrong answer, never a crash inside
a kernel.
"""

from __future__ import annotations

import math
import numbers

import torch

from flashattn2._triton_common import KERNELS_INTERPRETED, interpreting

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# The largest head dimension the kernels tile: Q, K and V tiles of 256 columns
# still fit in the shared memory of current GPUs with 64-row tiles.
MAX_HEAD_DIM = 256
# Triton's tensor-core path for fp16/bf16 needs compute capability 8.0 (Ampere) or newer.
MIN_CUDA_CAPABILITY = (8, 0)

_SHAPES = "q (B, Nq, D) with k, v (B, Nk, D), or q (B, H, Nq, D) with k, v (B, Hkv, Nk, D)"


def triton_runs_on_cpu() -> bool:
    """True when the Triton kernels can take CPU tensors: they were built for the interpreter
    (``TRITON_INTERPRET=1`` when flashattn2 was imported, see
    :data:`~flashattn2._triton_common.KERNELS_INTERPRETED`) and ``TRITON_INTERPRET=1``
    still holds (whoever unset it asked for no interpreter)."""
    return KERNELS_INTERPRETED and interpreting()


def check_attention_inputs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float | None = None
) -> float:
    """Validate q, k, v (and the optional scale); return the softmax scale to use (default ``1/sqrt(D)``)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        # Sparse (COO, CSR, ...), MKL-DNN and nested tensors have no strides the kernels could index.
        if x.is_nested:
            raise TypeError(
                f"{name} must be a dense tensor (layout torch.strided), not a nested tensor: pad the sequences "
                "to one length (torch.nested.to_padded_tensor) or call flash_attention once per sequence"
            )
        if x.layout != torch.strided:
            raise TypeError(
                f"{name} must be a dense tensor (layout torch.strided); got layout {x.layout}: "
                f"convert it with {name}.to_dense()"
            )
    # Each ``.shape``, ``.dtype`` and ``.device`` builds a new Python object: read them once.
    q_shape, k_shape, v_shape = q.shape, k.shape, v.shape
    rank = len(q_shape)
    if rank not in (3, 4):
        raise ValueError(f"q must have 3 or 4 dimensions ({_SHAPES}); got q.shape={tuple(q_shape)}")
    for name, shape in (("k", k_shape), ("v", v_shape)):
        if len(shape) != rank:
            raise ValueError(
                f"{name} must have as many dimensions as q ({_SHAPES}); "
                f"got q.shape={tuple(q_shape)}, {name}.shape={tuple(shape)}"
            )
    if k_shape != v_shape:
        raise ValueError(f"k and v must have the same shape; got k.shape={tuple(k_shape)}, v.shape={tuple(v_shape)}")
    head_dim = q_shape[-1]
    if k_shape[-1] != head_dim:
        raise ValueError(
            f"q and k must have the same head dimension D (last dim); got q.shape={tuple(q_shape)}, "
            f"k.shape={tuple(k_shape)}"
        )
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head dimension D = q.shape[-1] must be in 1..{MAX_HEAD_DIM}; got {head_dim}")
    if k_shape[0] != q_shape[0]:
        raise ValueError(
            f"q and k must have the same batch size (dim 0); got q.shape={tuple(q_shape)}, k.shape={tuple(k_shape)}"
        )
    if rank == 4:
        heads, kv_heads = q_shape[1], k_shape[1]
        if (kv_heads == 0 and heads != 0) or (kv_heads and heads % kv_heads):
            raise ValueError(
                f"the number of k/v heads (k.shape[1] = {kv_heads}) must divide the number of query heads "
                f"(q.shape[1] = {heads}) for grouped-query attention"
            )
    dtype, device = q.dtype, q.device
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"q.dtype must be torch.float16, torch.bfloat16 or torch.float32; got {dtype}")
    for name, x in (("k", k), ("v", v)):
        if x.dtype != dtype:
            raise TypeError(f"q, k and v must have the same dtype; got q.dtype={dtype}, {name}.dtype={x.dtype}")
        if x.device != device:
            raise ValueError(f"q, k and v must be on the same device; got q.device={device}, {name}.device={x.device}")
    if softmax_scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(softmax_scale, bool) or not isinstance(softmax_scale, numbers.Real):
        raise TypeError(f"softmax_scale must be a real number or None; got {type(softmax_scale).__name__}")
    if not math.isfinite(softmax_scale):
        raise ValueError(f"softmax_scale must be finite; got {softmax_scale}")
    return float(softmax_scale)


_capabilities: dict[int, tuple[int, int]] = {}


def device_index(device: torch.device) -> int:
    """The index of a CUDA ``device``: its own, or the current device's where it names none (``"cuda"``)."""
    return torch.cuda.current_device() if device.index is None else device.index


def cuda_capability(device: torch.device) -> tuple[int, int]:
    """``torch.cuda.get_device_capability(device)``, asked once per device (it costs host time on every call)."""
    index = device_index(device)
    capability = _capabilities.get(index)
    if capability is None:
        capability = _capabilities[index] = torch.cuda.get_device_capability(index)
    return capability


def check_triton_device(device: torch.device) -> None:
    """Raise ``ValueError`` unless the Triton kernels can run on ``device``."""
    if device.type == "cpu":
        if interpreting() != KERNELS_INTERPRETED:
            then, now = ("1", "not 1") if KERNELS_INTERPRETED else ("not 1", "1")
            raise ValueError(
                f"the Triton backend cannot run CPU tensors: TRITON_INTERPRET was {then} when flashattn2 was "
                f"imported and is {now} now, but Triton fixed the kernels' mode at import: set TRITON_INTERPRET=1 "
                "before importing flashattn2 and keep it set, or use backend='pytorch'"
            )
        if not KERNELS_INTERPRETED:  # and, past the check above, not now either
            raise ValueError(
                "the Triton backend runs CPU tensors only through Triton's interpreter: set TRITON_INTERPRET=1 "
                "before importing flashattn2, or use backend='pytorch'"
            )
        return
    if device.type != "cuda":
        raise ValueError(f"the Triton backend needs CUDA (or CPU with TRITON_INTERPRET=1) tensors; got {device}")
    if torch.version.hip is None and cuda_capability(device) < MIN_CUDA_CAPABILITY:
        major, minor = cuda_capability(device)
        raise ValueError(
            f"the Triton backend needs a CUDA GPU of compute capability >= 8.0; {device} has {major}.{minor}: "
            "use backend='pytorch'"
        )


def forward_any_layout(forward, q, k, v, causal: bool, softmax_scale: float):
    """Run ``forward`` (a :func:`~flashattn2.reference.tiled_forward`-like function of the
    (B, H, N, D) layout) on validated q, k, v of either layout: -> (O with q's shape,
    L with ``q.shape[:-1]``). The (B, N, D) layout runs as (B, 1, N, D) views."""
    if q.dim() == 4:
        return forward(q, k, v, causal, softmax_scale)
    out, lse = forward(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), causal, softmax_scale)
    return out.squeeze(1), lse.squeeze(1)


def backward_any_layout(backward, grad_out, q, k, v, out, lse, causal: bool, softmax_scale: float, *options):
    """Run ``backward`` (a :func:`~flashattn2._triton_backward.triton_backward`-like function of
    the (B, H, N, D) layout, called with ``*options`` after its scale) on tensors of either
    layout: -> (dq, dk, dv) with the shapes of q, k, v."""
    if q.dim() == 4:
        return backward(grad_out, q, k, v, out, lse, causal, softmax_scale, *options)
    grads = backward(*(x.unsqueeze(1) for x in (grad_out, q, k, v, out, lse)), causal, softmax_scale, *options)
    return tuple(x.squeeze(1) for x in grads)
