"""Memory and communication of large-scale training, on paper: a calculator, not a measurement.

Given a model (:class:`ModelShape`), a device (:class:`Device`) and the degrees of
data, fully sharded data, tensor and pipeline parallelism (:class:`Parallelism`),
:func:`account` computes per device the memory (model state and activations),
whether it fits and how many devices the model needs at all, compute and
communication time per step and which one bounds the step, and the smallest
global batch at which compute time reaches communication time. The formulas,
their sources and assumptions are in benchkit's README ("benchkit accounting");
:data:`FORMULAS` lists them, and ``benchkit accounting`` writes them into its JSON.

Example::

    from benchkit.accounting import DEVICES, Parallelism, account, named_model

    row = account(
        named_model("xxl-ffn", seq_len=2048),
        DEVICES["tpu-v5p"],
        Parallelism(fsdp=16, tp=4),
        batch_size=256,
        seq_len=2048,
    )
    print(row["total_gb"], row["compute_ms"], row["comm_ms"], row["bound_by"])
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from matplotlib.figure import Figure

from benchkit.errors import BenchkitError
from benchkit.flops import model_flops
from benchkit.model import SIZES, ModelConfig, model_config, parameter_count
from benchkit.plot import line_plot
from benchkit.units import GB

__all__ = [
    "DEVICES",
    "FORMULAS",
    "MODEL_NAMES",
    "Accounting",
    "AccountingSettings",
    "Device",
    "ModelShape",
    "Parallelism",
    "account",
    "check_parallelism",
    "communication_bytes",
    "compute_bound_tokens",
    "devices_to_fit",
    "ffn_model",
    "memory_per_device",
    "named_model",
    "override_device",
    "run_accounting",
    "step_times",
    "transformer_model",
]

BYTES_PER_PARAMETER = {  # model state of mixed-precision AdamW training, bytes per parameter
    "master_fp32": 4,
    "compute_bf16": 2,
    "grads_fp32": 4,
    "adamw_m_fp32": 4,
    "adamw_v_fp32": 4,
}
ACTIVATION_BYTES = 2  # bf16 activations
COMM_BYTES = 2  # bf16 payloads on the wire

# The formulas of the model, with P parameters, L layers, width d, feed-forward width f,
# G tokens per step, n = dp*fsdp*tp*pp devices, C FLOP/s and W link bytes/s (README).
FORMULAS = {
    "model_state_bytes": "18 * P / (tp * pp * fsdp)",
    "activation_bytes": "2 * G / (dp * fsdp) * L / pp * (a_replicated + a_split / tp)",
    "compute_s": "3 * F * G / (n * C)",
    "fsdp_bytes": "3 * (fsdp - 1) / fsdp * S, S = 2 * P / (tp * pp)",
    "dp_bytes": "2 * (dp - 1) / dp * S / fsdp",
    "tp_bytes": "2 * k * 2 * (tp - 1) / tp * 2 * d * G / (dp * fsdp) * L / pp",
    "pp_bytes": "2 * 2 * d * G / (dp * fsdp) if pp > 1",
    "comm_s": "bytes / W",
    "step_s": "max(compute_s, comm_s)",
    "compute_bound_tokens": "c0 / (a - c1) for comm_s = c0 + c1 * G and compute_s = a * G",
}


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
    "h100": Device(
        "H100 SXM",
        989e12,
        80 * GB,
        3.35e12,
        450 * GB,
        "NVIDIA H100 datasheet (SXM): 989 TFLOP/s dense bf16, 80 GB HBM3, 3.35 TB/s, NVLink 900 GB/s bidirectional",
    ),
    # Google Cloud TPU documentation, "TPU v5p": 459 TFLOPs bf16 per chip, HBM2e 95 GB
    # at 2765 GBps, bidirectional inter-chip interconnect (ICI) bandwidth 1200 GBps per
    # chip (4800 Gbps in older versions of the page), so 600 GB/s each way.
    "tpu-v5p": Device(
        "TPU v5p",
        459e12,
        95 * GB,
        2765 * GB,
        600 * GB,
        "Google Cloud TPU v5p docs: 459 TFLOP/s bf16, 95 GB HBM2e, 2765 GB/s, ICI 1200 GB/s bidirectional",
    ),
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
    as the formulas do:

    - tensor parallelism (Megatron-LM) gives each of its ranks an equal share of
      the attention heads and of the feed-forward width: tp must divide both;
    - a pipeline stage holds L/pp layers: pp is at most L;
    - each of the dp*fsdp data-parallel ranks sees G/(dp*fsdp) tokens: at least
      one sequence each, so dp*fsdp is at most the batch.
    """
    for count, what in (
        (model.num_heads, f"{model.num_heads} attention heads"),
        (model.d_ff, f"feed-forward width d_ff = {model.d_ff}"),
    ):
        if count is not None and count % par.tp:
            raise BenchkitError(
                f"--tp {par.tp} must divide {model.name}'s {what}: tensor parallelism gives each rank an equal share"
            )
    if par.pp > model.num_layers:
        raise BenchkitError(
            f"--pp {par.pp} must be at most {model.name}'s {model.num_layers} layers: "
            f"every pipeline stage holds at least one"
        )
    if par.dp * par.fsdp > batch_size:
        raise BenchkitError(
            f"--dp {par.dp} x --fsdp {par.fsdp} = {par.dp * par.fsdp} data-parallel ranks must be "
            f"at most --batch-size {batch_size}: every rank needs at least one sequence"
        )


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
    """Bytes each device sends per step, per kind of parallelism (:data:`FORMULAS`)."""
    replica = COMM_BYTES * model.parameters / (par.tp * par.pp)
    activation_bytes = COMM_BYTES * model.d_model * tokens / (par.dp * par.fsdp)
    return {
        "fsdp": 3 * (par.fsdp - 1) / par.fsdp * replica,
        "dp": 2 * (par.dp - 1) / par.dp * replica / par.fsdp,
        "tp": 2
        * model.tp_allreduces_per_layer
        * 2
        * (par.tp - 1)
        / par.tp
        * activation_bytes
        * model.num_layers
        / par.pp,
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
        "dp": par.dp,
        "fsdp": par.fsdp,
        "tp": par.tp,
        "pp": par.pp,
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class AccountingSettings:
    """What to account: a model, device presets, parallelism degrees and a batch
    (the defaults are ``benchkit accounting``'s example), and optional device overrides.

    Attributes:
        model: ``"xxl-ffn"`` or a key of :data:`benchkit.model.SIZES` (:func:`named_model`).
        hardware: keys of :data:`DEVICES`.
        dp, fsdp, tp, pp: the degrees of :class:`Parallelism`.
        batch_size: global batch, sequences per step.
        seq_len: tokens per sequence.
        flops, memory_gb, link_bandwidth: replace the presets' FLOP/s, memory (GB) and
            link bandwidth (bytes/s each direction) where given.
    """

    model: str = "xxl-ffn"
    hardware: tuple[str, ...] = tuple(DEVICES)
    dp: int = 1
    fsdp: int = 16
    tp: int = 4
    pp: int = 1
    batch_size: int = 256
    seq_len: int = 2048
    flops: float | None = None
    memory_gb: float | None = None
    link_bandwidth: float | None = None


@dataclasses.dataclass(frozen=True)
class Accounting:
    """The accounting of one :class:`AccountingSettings`: what was accounted, and one row per device."""

    model: ModelShape
    devices: list[Device]
    parallelism: Parallelism
    seq_len: int
    rows: list[dict[str, Any]]

    def meta(self) -> dict[str, Any]:
        """What the rows were computed from, and :data:`FORMULAS`, for the JSON's ``meta``."""
        return {
            "model": dataclasses.asdict(self.model),
            "devices": [dataclasses.asdict(d) for d in self.devices],
            "parallelism": dataclasses.asdict(self.parallelism),
            "formulas": FORMULAS,
        }

    def figure(self) -> Figure:
        """Compute and communication time per step against the global batch (1 to 16384 sequences), log-log."""
        batches = [2**k for k in range(15)]
        series = {}
        for device in self.devices:
            times = [step_times(self.model, device, self.parallelism, b * self.seq_len) for b in batches]
            series[f"{device.name} compute"] = (batches, [t[0] * 1e3 for t in times])
            if any(t[1] > 0 for t in times):
                series[f"{device.name} comm"] = (batches, [t[1] * 1e3 for t in times])
        par = self.parallelism
        return line_plot(
            series,
            title=f"{self.model.name}: time per step, dp{par.dp} fsdp{par.fsdp} tp{par.tp} pp{par.pp}",
            xlabel=f"global batch (sequences of {self.seq_len} tokens)",
            ylabel="ms per step",
            log_x=True,
            log_y=True,
        )


def override_device(
    device: Device, *, flops: float | None = None, memory_gb: float | None = None, link_bandwidth: float | None = None
) -> Device:
    """``device`` with the given numbers replaced (None keeps the preset's); ``source`` says which were."""
    overrides = {
        "flops": flops,
        "memory": None if memory_gb is None else memory_gb * GB,
        "link_bandwidth": link_bandwidth,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if not overrides:
        return device
    return dataclasses.replace(device, source=device.source + f"; overridden: {sorted(overrides)}", **overrides)


def run_accounting(settings: AccountingSettings) -> Accounting:
    """Account ``settings`` on each of its devices. Raises :class:`~benchkit.errors.BenchkitError`
    where the degrees cannot split the model or the batch (:func:`check_parallelism`)."""
    model = named_model(settings.model, settings.seq_len)
    par = Parallelism(dp=settings.dp, fsdp=settings.fsdp, tp=settings.tp, pp=settings.pp)
    check_parallelism(model, par, settings.batch_size)
    devices = [
        override_device(
            DEVICES[key], flops=settings.flops, memory_gb=settings.memory_gb, link_bandwidth=settings.link_bandwidth
        )
        for key in settings.hardware
    ]
    rows = [account(model, device, par, batch_size=settings.batch_size, seq_len=settings.seq_len) for device in devices]
    return Accounting(model, devices, par, settings.seq_len, rows)
