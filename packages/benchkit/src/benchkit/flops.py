"""Model FLOPs of the reference Transformer and model FLOPs utilization (MFU).

MFU (Chowdhery et al. 2022, "PaLM", appendix B) is the FLOP/s the *model* needs
(counted from its shape, not from what the kernels happen to execute, so
recomputation and padding earn nothing) divided by the device's peak FLOP/s.

Per token, with N the parameters that take part in matrix multiplies (all of
them except the input embedding table, which is a lookup), L layers, width d and
sequence length T, the forward pass costs ``2*N + 4*L*d*T`` FLOPs: 2 FLOPs per
multiply-add, and the attention scores ``Q K^T`` and the weighted sum ``P V``
cost ``2*T*d`` each per token and layer (counted without the causal half, as
PaLM does). The backward pass costs twice the forward, so a training step costs
``6*N + 12*L*d*T`` per token. The optimizer's element-wise work is not counted.

Example::

    from benchkit.flops import model_flops, peak_flops
    from benchkit.model import model_config

    config = model_config("xl", context_length=256)
    flops = model_flops(config, batch_size=4, seq_len=256, backward=True)  # one train step
    peak = peak_flops("NVIDIA H100 80GB HBM3", "bf16")  # 989.4e12
    # MFU = flops / step_seconds / peak
"""

from __future__ import annotations

from benchkit.model import ModelConfig, parameter_count

__all__ = ["PEAK_TFLOPS", "matmul_parameters", "model_flops", "peak_flops"]

# Dense (no structured sparsity) peak tensor throughput in TFLOP/s from NVIDIA's
# datasheets: "NVIDIA H100 Tensor Core GPU" datasheet (SXM and PCIe columns; the
# sparsity figures halved), "NVIDIA H200 Tensor Core GPU" datasheet, "NVIDIA A100
# Tensor Core GPU" datasheet. "fp32" is the non-tensor-core FP32 rate, which is
# what float32 matmuls get with torch's default matmul precision "highest";
# "tf32" applies when torch.set_float32_matmul_precision("high") is in effect.
# Keys are matched as substrings of torch.cuda.get_device_name(), first match wins.
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.0},
    "H100 80GB HBM3": {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9},  # the SXM5 board's name
    "H100 SXM": {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9},
    "H200": {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9},  # SXM
    "A100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
}


def matmul_parameters(config: ModelConfig) -> int:
    """N of the formula: every parameter except the embedding table (vocab_size * d_model)."""
    return parameter_count(config) - config.vocab_size * config.d_model


def model_flops(config: ModelConfig, batch_size: int, seq_len: int, *, backward: bool) -> float:
    """Model FLOPs of one step on ``batch_size`` sequences of ``seq_len`` tokens:
    the forward pass, plus the backward pass (twice the forward) if ``backward``."""
    if seq_len > config.context_length or seq_len < 1:
        raise ValueError(f"seq_len must be in [1, {config.context_length}], got {seq_len}")
    forward_per_token = 2 * matmul_parameters(config) + 4 * config.num_layers * config.d_model * seq_len
    return float(batch_size * seq_len * forward_per_token * (3 if backward else 1))


def peak_flops(device_name: str, precision: str, *, float32_matmul_precision: str = "highest") -> float | None:
    """Peak dense FLOP/s of the device named ``device_name`` for matmuls in
    ``precision`` ("fp32", "bf16" or "fp16"), or None for a device not in
    :data:`PEAK_TFLOPS` (then no MFU is reported). For "fp32",
    ``float32_matmul_precision`` (torch.get_float32_matmul_precision()) selects
    the FP32 rate ("highest") or the TF32 tensor-core rate ("high", "medium")."""
    if precision not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"precision must be 'fp32', 'bf16' or 'fp16', got {precision!r}")
    key = precision
    if precision == "fp32" and float32_matmul_precision != "highest":
        key = "tf32"
    for name, rates in PEAK_TFLOPS.items():
        if name in device_name:
            return rates[key] * 1e12
    return None
