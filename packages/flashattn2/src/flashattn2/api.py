"""``flash_attention``: the functional entry point.

It validates its arguments, resolves the backend and runs
:class:`~flashattn2.autograd.ScaledAttention`, in eager mode and under
``torch.compile`` alike (:mod:`flashattn2._ops` says how the kernels reach the
compiler).
"""

from __future__ import annotations

import torch

from flashattn2._inputs import check_attention_inputs, check_triton_device, triton_runs_on_cpu
from flashattn2.autograd import scaled_attention

BACKENDS = ("auto", "triton", "pytorch")
_TRITON_CUDA_DEVICES: set[torch.device] = set()  # the CUDA devices check_triton_device has accepted


@torch.compiler.assume_constant_result
def _triton_on_cpu() -> bool:
    return triton_runs_on_cpu()


def resolve_backend(backend: str, device: torch.device) -> str:
    """``"triton"`` or ``"pytorch"``: the implementation that serves ``backend`` on ``device``.

    ``"auto"`` picks Triton for CUDA tensors, and for CPU tensors when Triton's
    interpreter is on: ``TRITON_INTERPRET=1`` when flashattn2 was imported (Triton
    builds the kernels for the interpreter or for a GPU then) and still now; the
    tiled PyTorch implementation otherwise. ``"triton"`` raises ``ValueError``
    where the kernels cannot run.
    """
    if device in _TRITON_CUDA_DEVICES and (backend == "auto" or backend == "triton"):  # checked before
        return "triton"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    if backend == "auto":
        backend = "triton" if device.type == "cuda" or (device.type == "cpu" and _triton_on_cpu()) else "pytorch"
    if backend == "triton":
        check_triton_device(device)
        if device.type == "cuda":  # a CUDA device's fitness does not change; the interpreter's can
            _TRITON_CUDA_DEVICES.add(device)
    return backend


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    softmax_scale: float | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Scaled dot-product attention, ``softmax(scale * q k^T [+ causal mask]) v``, computed by FlashAttention-2.

    Arguments:
        q: ``(B, Nq, D)`` or ``(B, H, Nq, D)``.
        k, v: ``(B, Nk, D)`` or ``(B, Hkv, Nk, D)``, same rank as q. With 4-D
            inputs ``Hkv`` may be smaller than ``H`` if it divides it
            (grouped-query / multi-query attention): query head ``h`` uses k/v
            head ``h // (H // Hkv)``.
            All three: the same dtype (float16, bfloat16 or float32) and device;
            head dim ``1 <= D <= 256``; any ``Nq, Nk >= 0``; any strides (views
            of a packed QKV tensor, transposes) without copies.
        causal: mask future keys, aligned to the bottom-right corner: query ``i``
            sees key ``j`` iff ``j <= i + Nk - Nq`` (the usual mask when
            ``Nq == Nk``; with a KV cache the last query sees every key). A query
            that sees no key (``Nq > Nk``, its first ``Nq - Nk`` rows) gets 0.
        softmax_scale: multiplies ``q . k``; default ``1 / sqrt(D)``.
        backend: ``"auto"`` (Triton on CUDA; on CPU, Triton when
            ``TRITON_INTERPRET=1`` was set before flashattn2 was imported and
            still is, else the tiled PyTorch implementation), ``"triton"`` or
            ``"pytorch"``.

    Returns:
        O with q's shape, dtype and device (contiguous). Differentiable in q, k, v,
        once: differentiating through its gradients (double backward) raises a
        ``RuntimeError``.

    Raises:
        TypeError: non-tensor, sparse or nested inputs, unsupported or mixed
            dtypes, non-real scale.
        ValueError: ranks or shapes that do not match, D outside 1..256, k/v heads
            that do not divide q heads, different devices, an unknown backend, or
            a device the Triton kernels cannot serve.

    Example::

        >>> import torch
        >>> from flashattn2 import flash_attention
        >>> q = torch.randn(2, 8, 128, 64)          # (B, H, N, D)
        >>> k = v = torch.randn(2, 2, 128, 64)      # 2 k/v heads shared by 8 query heads
        >>> flash_attention(q, k, v, causal=True).shape
        torch.Size([2, 8, 128, 64])
    """
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool; got {type(causal).__name__}")
    scale = check_attention_inputs(q, k, v, softmax_scale)
    return scaled_attention(q, k, v, causal, scale, resolve_backend(backend, q.device))
