"""``benchkit accounting``: memory and communication of large-scale training, on paper.

A calculator, not a measurement: given a model, a device and the degrees of data
parallelism (``dp``), fully sharded data parallelism (``fsdp``), tensor
parallelism (``tp``) and pipeline parallelism (``pp``), it computes per device

- **memory**: model state and activations (below), whether it fits, and how many
  devices the model needs at all;
- **time per step**: compute at the device's peak FLOP/s against the time the
  collectives take on its links, and which one bounds the step;
- **the compute-bound batch**: the smallest global batch at which compute time
  reaches communication time.

Notation: P parameters, L layers, d model width, f feed-forward width, G tokens
per step (global batch of sequences times sequence length), n = dp*fsdp*tp*pp
devices, C the device's FLOP/s, W its link bandwidth (bytes/s, each direction).

Model state per device (mixed precision training with AdamW, Micikevicius et al.
2018, "Mixed Precision Training"; Rajbhandari et al. 2020, "ZeRO", section 3.1):
every parameter has an fp32 master copy (4 bytes), a bf16 compute copy (2), an
fp32 gradient (4) and AdamW's fp32 first and second moments (4 + 4): 18 bytes.
Tensor and pipeline parallelism split the parameters; FSDP shards every piece
of model state over its group; plain data parallelism replicates:
``state = 18 * P / (tp * pp * fsdp)``.

Activations per device, kept for the backward pass in bf16 (2 bytes): each data
parallel rank (dp*fsdp of them) sees ``G / (dp * fsdp)`` tokens; a pipeline stage
holds L/pp layers and, counted as with GPipe (Huang et al. 2019), the activations
of the whole local batch; tensor parallelism splits the tensors that are sharded
over heads or the feed-forward width, not the d-wide ones:
``activations = 2 * G/(dp*fsdp) * L/pp * (a_replicated + a_split / tp)``, with per
token and layer

- FFN-only model (blocks ``x + W2 relu(W1 x)``): a_replicated = d (the block input),
  a_split = f (the hidden pre-activation; the element-wise nonlinearity is
  recomputed in backward);
- the reference Transformer (:mod:`benchkit.model`, attention without an N x N
  score matrix): a_replicated = 4d (the inputs of the two RMSNorms and of the
  q/k/v and W1/W3 projections), a_split = 4d + 3f (q, k, v after RoPE, the
  attention output; W1 x, W3 x and their SiLU-gated product).

Compute per step: forward FLOPs per token F (FFN-only: ``4*d*f*L``; Transformer:
:func:`benchkit.flops.model_flops`), backward twice the forward (PaLM appendix B),
spread evenly: ``t_compute = 3 * F * G / (n * C)``.

Communication per step and device, bf16 payloads (2 bytes), ring collectives
(Patarasuk and Yuan 2009: an all-reduce over k devices sends ``2(k-1)/k`` times
the buffer from each device; an all-gather or a reduce-scatter ``(k-1)/k``).
With ``S = 2 * P / (tp * pp)`` the bytes of one model replica's parameters on a
tensor/pipeline position:

- FSDP: all-gather the weights for forward, again for backward, reduce-scatter
  the gradients: ``3 * (fsdp-1)/fsdp * S``;
- data parallel: all-reduce the (FSDP-sharded) gradients: ``2 * (dp-1)/dp * S/fsdp``;
- tensor parallel (Megatron-LM, Shoeybi et al. 2019): ``k`` all-reduces of the
  d-wide activations per layer in forward and ``k`` in backward (k = 2 for a
  Transformer layer, 1 for an FFN block):
  ``2k * 2(tp-1)/tp * 2*d*G/(dp*fsdp) * L/pp``;
- pipeline: one stage boundary per device, activations forward and their
  gradients backward: ``2 * 2*d*G/(dp*fsdp)`` when pp > 1.

``t_comm = bytes / W``. Communication is assumed to overlap with compute, so a
step takes ``max(t_compute, t_comm)``; pipeline bubbles are not modelled.
Weight traffic (FSDP, dp) does not grow with the batch, activation traffic (tp,
pp) does: ``t_comm = c0 + c1*G`` and ``t_compute = a*G``, so the step becomes
compute-bound at ``G* = c0 / (a - c1)``, and never when ``a <= c1``.

The command refuses degrees that cannot split the model and the batch this way
(:func:`check_parallelism`): tp must divide the attention heads and f, pp be at
most L, and dp*fsdp at most the global batch in sequences.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path
from typing import Any

from benchkit.argtypes import positive_float, positive_int
from benchkit.errors import BenchkitError
from benchkit.flops import model_flops
from benchkit.model import SIZES, ModelConfig, model_config, parameter_count
from benchkit.plot import line_plot
from benchkit.report import add_output_arguments, format_table, write_results

HELP = "memory and communication of large-scale training: per-device memory, compute vs communication time"
EXAMPLES = """\
  benchkit accounting                                  # FFN-only XXL model, H100 and TPU v5p, fsdp 16 x tp 4
  benchkit accounting --model 2.7B --hardware h100 --dp 8 --fsdp 1 --tp 1 --batch-size 64 --seq-len 1024
  benchkit accounting --model xxl-ffn --fsdp 64 --tp 1 --hardware tpu-v5p
  benchkit accounting --hardware h100 --flops 4e14 --link-bandwidth 1e11   # your own device
"""

BYTES_PER_PARAMETER = {  # model state of mixed-precision AdamW training, bytes per parameter
    "master_fp32": 4,
    "compute_bf16": 2,
    "grads_fp32": 4,
    "adamw_m_fp32": 4,
    "adamw_v_fp32": 4,
}
ACTIVATION_BYTES = 2  # bf16 activations
COMM_BYTES = 2  # bf16 payloads on the wire
GB = 1e9  # decimal gigabytes, as in the datasheets


@dataclasses.dataclass(frozen=True)
class Device:
    """An accelerator's peak numbers.

    Attributes:
        name: label in tables.
        flops: dense bf16 matmul throughput, FLOP/s.
        memory: device memory, bytes.
        memory_bandwidth: device memory bandwidth, bytes/s (reported, not used in the step model).
        link_bandwidth: device-to-device bandwidth per device, bytes/s in each direction.
        source: where the numbers come from.
    """

    name: str
    flops: float
    memory: float
    memory_bandwidth: float
    link_bandwidth: float
    source: str


DEVICES = {
    # NVIDIA H100 Tensor Core GPU datasheet, SXM column: BF16 Tensor Core 1,979 TFLOPS
    # "with sparsity" (989 dense), 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s. The
    # 900 GB/s is the sum over both directions of the 18 NVLink 4 links, so 450 GB/s
    # each way.
    "h100": Device("H100 SXM", 989e12, 80 * GB, 3.35e12, 450 * GB,
                   "NVIDIA H100 datasheet (SXM): 989 TFLOP/s dense bf16, 80 GB HBM3, 3.35 TB/s, NVLink 900 GB/s bidirectional"),
    # Google Cloud TPU documentation, "TPU v5p": 459 TFLOPs bf16 per chip, HBM2e 95 GB
    # at 2765 GBps, bidirectional inter-chip interconnect (ICI) bandwidth 1200 GBps per
    # chip (4800 Gbps in older versions of the page), so 600 GB/s each way.
    "tpu-v5p": Device("TPU v5p", 459e12, 95 * GB, 2765 * GB, 600 * GB,
                      "Google Cloud TPU v5p docs: 459 TFLOP/s bf16, 95 GB HBM2e, 2765 GB/s, ICI 1200 GB/s bidirectional"),
}


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """What the accounting needs to know about a model.

    Attributes:
        name: label in tables.
        parameters: P, the number of parameters.
        num_layers: L.
        d_model: d, the width of the activations exchanged between layers and devices.
        d_ff: f, the feed-forward width.
        num_heads: attention heads per layer, None for a model without attention.
        forward_flops_per_token: F, FLOPs of one token's forward pass.
        activations_replicated: a_replicated, elements per token and layer kept for backward
            that tensor parallelism does not split.
        activations_split: a_split, elements per token and layer that it splits.
        tp_allreduces_per_layer: k, all-reduces of d-wide activations per layer in forward.
    """

    name: str
    parameters: int
    num_layers: int
    d_model: int
    d_ff: int
    num_heads: int | None
    forward_flops_per_token: float
    activations_replicated: int
    activations_split: int
    tp_allreduces_per_layer: int


def ffn_model(name: str, d_model: int, d_ff: int, num_layers: int) -> ModelShape:
    """A stack of ``num_layers`` feed-forward blocks ``x + W2 relu(W1 x)`` (no biases, no attention)."""
    return ModelShape(
        name=name,
        parameters=2 * d_model * d_ff * num_layers,
        num_layers=num_layers,
        d_model=d_model,
        d_ff=d_ff,
        num_heads=None,
        forward_flops_per_token=4.0 * d_model * d_ff * num_layers,  # two matmuls, 2 FLOPs per multiply-add
        activations_replicated=d_model,
        activations_split=d_ff,
        tp_allreduces_per_layer=1,
    )


def transformer_model(config: ModelConfig, name: str) -> ModelShape:
    """The reference :class:`~benchkit.model.TransformerLM` at ``config.context_length`` tokens per sequence."""
    d, f = config.d_model, config.d_ff
    return ModelShape(
        name=name,
        parameters=parameter_count(config),
        num_layers=config.num_layers,
        d_model=d,
        d_ff=f,
        num_heads=config.num_heads,
        forward_flops_per_token=model_flops(config, 1, config.context_length, backward=False) / config.context_length,
        activations_replicated=4 * d,
        activations_split=4 * d + 3 * f,
        tp_allreduces_per_layer=2,
    )


# The FFN-only "XXL" model of the accounting exercise (Stanford CS336 spring 2025,
# assignment 2): d_model 16384, d_ff 53248, 126 blocks.
XXL_FFN = dict(d_model=16384, d_ff=53248, num_layers=126)
MODEL_NAMES = ["xxl-ffn", *SIZES]


def named_model(name: str, seq_len: int) -> ModelShape:
    """``"xxl-ffn"`` or a :data:`benchkit.model.SIZES` name (a Transformer with ``seq_len`` tokens)."""
    if name == "xxl-ffn":
        return ffn_model(name, **XXL_FFN)
    if name in SIZES:
        return transformer_model(model_config(name, context_length=seq_len), name)
    raise ValueError(f"model must be one of {MODEL_NAMES}, got {name!r}")


@dataclasses.dataclass(frozen=True)
class Parallelism:
    """Degrees of data (dp), fully sharded data (fsdp), tensor (tp) and pipeline (pp) parallelism."""

    dp: int = 1
    fsdp: int = 1
    tp: int = 1
    pp: int = 1

    def __post_init__(self) -> None:
        for name in ("dp", "fsdp", "tp", "pp"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Parallelism.{name} must be a positive int, got {value!r}")

    @property
    def devices(self) -> int:
        return self.dp * self.fsdp * self.tp * self.pp


def check_parallelism(model: ModelShape, par: Parallelism, batch_size: int) -> None:
    """Raise :class:`~benchkit.errors.BenchkitError`, naming the option and its limit,
    where ``par`` cannot split ``model`` and a global batch of ``batch_size`` sequences
    as the formulas of the module docstring do:

    - tensor parallelism (Megatron-LM) gives each of its ranks an equal share of
      the attention heads and of the feed-forward width: tp must divide both;
    - a pipeline stage holds L/pp layers: pp is at most L;
    - each of the dp*fsdp data-parallel ranks sees G/(dp*fsdp) tokens: at least
      one sequence each, so dp*fsdp is at most the batch.
    """
    for count, what in ((model.num_heads, f"{model.num_heads} attention heads"),
                        (model.d_ff, f"feed-forward width d_ff = {model.d_ff}")):
        if count is not None and count % par.tp:
            raise BenchkitError(f"--tp {par.tp} must divide {model.name}'s {what}: "
                                f"tensor parallelism gives each rank an equal share")
    if par.pp > model.num_layers:
        raise BenchkitError(f"--pp {par.pp} must be at most {model.name}'s {model.num_layers} layers: "
                            f"every pipeline stage holds at least one")
    if par.dp * par.fsdp > batch_size:
        raise BenchkitError(f"--dp {par.dp} x --fsdp {par.fsdp} = {par.dp * par.fsdp} data-parallel ranks must be "
                            f"at most --batch-size {batch_size}: every rank needs at least one sequence")


def memory_per_device(model: ModelShape, par: Parallelism, tokens: float) -> dict[str, float]:
    """Bytes per device for each piece of model state, ``activations``, and ``total``,
    with ``tokens`` = G tokens per step in the whole job."""
    shard = par.tp * par.pp * par.fsdp
    memory = {key: model.parameters * size / shard for key, size in BYTES_PER_PARAMETER.items()}
    local_tokens = tokens / (par.dp * par.fsdp)
    per_token_layer = model.activations_replicated + model.activations_split / par.tp
    memory["activations"] = ACTIVATION_BYTES * local_tokens * model.num_layers / par.pp * per_token_layer
    memory["total"] = sum(memory.values())
    return memory


def devices_to_fit(model: ModelShape, device: Device, tokens: float) -> tuple[int, int]:
    """Fewest devices whose memory holds (the model state, the model state plus all
    activations of ``tokens`` tokens), with everything sharded evenly over them."""
    state = model.parameters * sum(BYTES_PER_PARAMETER.values())
    activations = (
        ACTIVATION_BYTES * tokens * model.num_layers * (model.activations_replicated + model.activations_split)
    )
    return math.ceil(state / device.memory), math.ceil((state + activations) / device.memory)


def communication_bytes(model: ModelShape, par: Parallelism, tokens: float) -> dict[str, float]:
    """Bytes each device sends per step, per kind of parallelism (see the module docstring)."""
    replica = COMM_BYTES * model.parameters / (par.tp * par.pp)
    activation_bytes = COMM_BYTES * model.d_model * tokens / (par.dp * par.fsdp)
    return {
        "fsdp": 3 * (par.fsdp - 1) / par.fsdp * replica,
        "dp": 2 * (par.dp - 1) / par.dp * replica / par.fsdp,
        "tp": 2 * model.tp_allreduces_per_layer * 2 * (par.tp - 1) / par.tp
        * activation_bytes * model.num_layers / par.pp,
        "pp": 2 * activation_bytes if par.pp > 1 else 0.0,
    }


def step_times(model: ModelShape, device: Device, par: Parallelism, tokens: float) -> tuple[float, float]:
    """(compute seconds, communication seconds) per step at ``tokens`` tokens per step."""
    compute = 3 * model.forward_flops_per_token * tokens / (par.devices * device.flops)
    comm = sum(communication_bytes(model, par, tokens).values()) / device.link_bandwidth
    return compute, comm


def compute_bound_tokens(model: ModelShape, device: Device, par: Parallelism) -> float | None:
    """Smallest tokens per step G* at which compute time reaches communication time
    (0 if there is no communication), or None if communication grows faster than compute."""
    _, c0 = step_times(model, device, par, 0.0)
    compute_per_token, comm_at_one_token = step_times(model, device, par, 1.0)
    comm_per_token = comm_at_one_token - c0
    if compute_per_token <= comm_per_token:
        return None
    return c0 / (compute_per_token - comm_per_token)


def account(model: ModelShape, device: Device, par: Parallelism, *, batch_size: int, seq_len: int) -> dict[str, Any]:
    """One row of the table: the whole accounting of ``model`` on ``par.devices`` copies of ``device``
    at ``batch_size`` sequences of ``seq_len`` tokens per step. Memory in GB, times in ms."""
    tokens = batch_size * seq_len
    memory = memory_per_device(model, par, tokens)
    fit_state, fit_all = devices_to_fit(model, device, tokens)
    compute, comm = step_times(model, device, par, tokens)
    bound = compute_bound_tokens(model, device, par)
    return {
        "model": model.name,
        "device": device.name,
        "dp": par.dp, "fsdp": par.fsdp, "tp": par.tp, "pp": par.pp,
        "devices": par.devices,
        "parameters": model.parameters,
        "batch_size": batch_size,
        "seq_len": seq_len,
        **{f"{key}_gb": value / GB for key, value in memory.items()},
        "fits": memory["total"] <= device.memory,
        "devices_for_state": fit_state,
        "devices_for_state_and_activations": fit_all,
        "compute_ms": compute * 1e3,
        "comm_ms": comm * 1e3,
        "bound_by": "compute" if compute >= comm else "communication",
        "compute_bound_tokens": bound,
        "compute_bound_batch": None if bound is None else math.ceil(bound / seq_len),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", choices=MODEL_NAMES, default="xxl-ffn",
                        help="FFN-only XXL model or a reference Transformer size (default: xxl-ffn)")
    parser.add_argument("--hardware", choices=list(DEVICES), nargs="+", default=list(DEVICES),
                        help="device presets (default: all)")
    for name, default, what in (("dp", 1, "data parallel"), ("fsdp", 16, "fully sharded data parallel"),
                                ("tp", 4, "tensor parallel"), ("pp", 1, "pipeline parallel")):
        parser.add_argument(f"--{name}", type=positive_int, default=default, metavar="N",
                            help=f"{what} degree (default: {default})")
    parser.add_argument("--batch-size", type=positive_int, default=256, metavar="B",
                        help="global batch, sequences per step (default: 256)")
    parser.add_argument("--seq-len", type=positive_int, default=2048, metavar="T",
                        help="tokens per sequence (default: 2048)")
    parser.add_argument("--flops", type=positive_float, metavar="FLOP/S", help="override the preset's FLOP/s")
    parser.add_argument("--memory-gb", type=positive_float, metavar="GB", help="override the preset's memory")
    parser.add_argument("--link-bandwidth", type=positive_float, metavar="BYTES/S",
                        help="override the preset's link bandwidth (bytes/s each direction)")
    add_output_arguments(parser)


def _device(args: argparse.Namespace, key: str) -> Device:
    device = DEVICES[key]
    overrides = {
        "flops": args.flops,
        "memory": None if args.memory_gb is None else args.memory_gb * GB,
        "link_bandwidth": args.link_bandwidth,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if overrides:
        device = dataclasses.replace(device, source=device.source + f"; overridden: {sorted(overrides)}", **overrides)
    return device


def run(args: argparse.Namespace) -> int:
    model = named_model(args.model, args.seq_len)
    par = Parallelism(dp=args.dp, fsdp=args.fsdp, tp=args.tp, pp=args.pp)
    check_parallelism(model, par, args.batch_size)
    devices = [_device(args, key) for key in args.hardware]
    rows = [account(model, device, par, batch_size=args.batch_size, seq_len=args.seq_len) for device in devices]
    print(f"{model.name}: {model.parameters:,} parameters; {par.devices} devices "
          f"(dp {par.dp} x fsdp {par.fsdp} x tp {par.tp} x pp {par.pp}); "
          f"{args.batch_size} x {args.seq_len} tokens per step")
    print(format_table(rows, ["device", "master_fp32_gb", "compute_bf16_gb", "grads_fp32_gb", "adamw_m_fp32_gb",
                              "adamw_v_fp32_gb", "activations_gb", "total_gb", "fits", "devices_for_state"]))
    print()
    print(format_table(rows, ["device", "compute_ms", "comm_ms", "bound_by", "compute_bound_tokens",
                              "compute_bound_batch"]))
    meta = {"model": dataclasses.asdict(model), "devices": [dataclasses.asdict(d) for d in devices],
            "parallelism": dataclasses.asdict(par), "formulas": __doc__}
    path = write_results(args.out, "accounting", rows, meta=meta, csv=args.csv)
    plot = _plot(Path(args.out) / "accounting.png", model, devices, par, args.seq_len)
    print(f"\nwrote {path} and {plot}")
    return 0


def _plot(path: Path, model: ModelShape, devices: list[Device], par: Parallelism, seq_len: int) -> Path:
    """Compute and communication time per step against the global batch, log-log."""
    batches = [2**k for k in range(0, 15)]  # 1 ... 16384 sequences
    series = {}
    for device in devices:
        times = [step_times(model, device, par, b * seq_len) for b in batches]
        series[f"{device.name} compute"] = (batches, [t[0] * 1e3 for t in times])
        if any(t[1] > 0 for t in times):
            series[f"{device.name} comm"] = (batches, [t[1] * 1e3 for t in times])
    return line_plot(path, series, title=f"{model.name}: time per step, dp{par.dp} fsdp{par.fsdp} tp{par.tp} pp{par.pp}",
                     xlabel=f"global batch (sequences of {seq_len} tokens)", ylabel="ms per step",
                     log_x=True, log_y=True)
