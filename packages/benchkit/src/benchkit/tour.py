"""The end-to-end tour of ``benchkit run``: what it measures on each kind of device, and its report.

Four sections, each measured on the spot by a library function:

1. **model**: phase timings of the reference Transformer in fp32 and bf16
   autocast (:func:`run_model_section`, :func:`benchkit.workload.benchmark`);
2. **attention**: naive vs SDPA vs ``flashattn2`` across sequence lengths
   (:func:`benchkit.attention.run_sweep`);
3. **parallel**: ``ddp.BucketedDDP`` with AdamW and with ZeRO-1 checked against
   single-process training (:mod:`benchkit.parallel_check`);
4. **accounting**: the default example of ``benchkit accounting``
   (:func:`benchkit.accounting.run_accounting`).

:data:`PLANS` holds the sizes per device: on a CPU the tiny model and small
attention shapes (about a minute on 2 cores); on a GPU, real sizes.
:class:`Tour` holds what the sections measured and writes the report.

Example::

    import torch
    from benchkit.tour import run_model_section, tour_plan

    plan = tour_plan(torch.device("cpu"))
    rows = run_model_section(plan.model, torch.device("cpu"))  # one row per size and precision
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from matplotlib.figure import Figure

from benchkit.accounting import Accounting
from benchkit.attention import BACKEND_NOTES, AttentionSweep
from benchkit.model import SIZES
from benchkit.parallel_check import COLUMNS as PARALLEL_COLUMNS
from benchkit.parallel_check import ParallelPlan, check_method
from benchkit.plot import bar_plot
from benchkit.report import format_table, progress
from benchkit.workload import WorkloadSettings, benchmark, table_rows

__all__ = ["ATTENTION_COLUMNS", "PLANS", "ModelSection", "Tour", "TourPlan", "run_model_section", "tour_plan"]

ATTENTION_COLUMNS = [
    "implementation",
    "backend",
    "dtype",
    "seq_len",
    "head_dim",
    "forward_ms",
    "backward_ms",
    "forward_backward_ms",
    "peak_memory_mib",
    "status",
]
ACCOUNTING_COLUMNS = [
    "device",
    "devices",
    "total_gb",
    "fits",
    "compute_ms",
    "comm_ms",
    "bound_by",
    "compute_bound_batch",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSection:
    """The model section: train steps of every size in every precision."""

    sizes: tuple[str, ...]
    context_length: int
    batch_size: int
    precisions: tuple[str, ...]
    warmup: int
    steps: int

    def settings(self) -> list[WorkloadSettings]:
        """One :class:`~benchkit.workload.WorkloadSettings` per (size, precision), sizes outermost."""
        return [
            WorkloadSettings(
                size=size,
                context_length=self.context_length,
                batch_size=self.batch_size,
                precision=precision,
                warmup=self.warmup,
                steps=self.steps,
            )
            for size in self.sizes
            for precision in self.precisions
        ]


@dataclasses.dataclass(frozen=True)
class TourPlan:
    """What the measured sections of the tour run on one kind of device."""

    model: ModelSection
    attention: AttentionSweep


# What the sections measure on each kind of device. CPU: small enough for well under
# a minute on 2 cores, also when flashattn2 runs in Triton's interpreter
# (TRITON_INTERPRET=1, as in CI), where one (N=128, D=16, H=2) cell takes seconds;
# CUDA: the GPT-2 small to large shapes at context 256 and the attention lengths where
# the N^2 score matrix starts to matter.
PLANS: dict[str, TourPlan] = {
    "cpu": TourPlan(
        model=ModelSection(
            sizes=("tiny",), context_length=128, batch_size=4, precisions=("fp32", "bf16"), warmup=2, steps=5
        ),
        attention=AttentionSweep(
            seq_lens=(32, 64, 128),
            head_dims=(16,),
            dtypes=("fp32",),
            implementations=("naive", "sdpa", "flashattn2"),
            heads=2,
            reps=2,
        ),
    ),
    "cuda": TourPlan(
        model=ModelSection(
            sizes=("small", "medium", "large"),
            context_length=256,
            batch_size=4,
            precisions=("fp32", "bf16"),
            warmup=5,
            steps=10,
        ),
        attention=AttentionSweep(
            seq_lens=(1024, 4096, 16384),
            head_dims=(64,),
            dtypes=("bf16",),
            implementations=("naive", "sdpa", "flashattn2"),
            heads=16,
            reps=10,
        ),
    ),
}


def tour_plan(device: torch.device, sizes: tuple[str, ...] | None = None) -> TourPlan:
    """The plan of :data:`PLANS` for ``device``'s kind, with the model section's ``sizes`` if given."""
    plan = PLANS[device.type]
    if sizes:
        unknown = [size for size in sizes if size not in SIZES]
        if unknown:
            raise ValueError(f"sizes must be keys of benchkit.model.SIZES, got {unknown}")
        plan = dataclasses.replace(plan, model=dataclasses.replace(plan.model, sizes=tuple(sizes)))
    return plan


def run_model_section(section: ModelSection, device: torch.device) -> list[dict[str, Any]]:
    """:func:`benchkit.workload.benchmark` of each of ``section.settings()``, with progress on stderr."""
    return [benchmark(settings, device) for settings in progress(section.settings(), "model")]


def plot_model_phases(rows: list[dict[str, Any]], section: ModelSection) -> Figure | None:
    """Bars of the forward, backward and optimizer phases' mean ms per (size, precision); None if none ran."""
    ok_rows = [r for r in rows if r["status"] == "ok"]
    if not ok_rows:
        return None
    return bar_plot(
        [f"{r['size']} {r['precision']}" for r in ok_rows],
        {phase: [r["phases"][phase].mean * 1e3 for r in ok_rows] for phase in ("forward", "backward", "optimizer")},
        title=f"Train-step phases, context {section.context_length}, batch {section.batch_size}",
        ylabel="ms (mean)",
    )


def _figure_markdown(name: str) -> str:
    """An inline image of a PNG or SVG figure file (relative to the report); a link to a PDF."""
    return f"[{name}]({name})" if name.endswith(".pdf") else f"![{name.rsplit('.', 1)[0]}]({name})"


@dataclasses.dataclass
class Tour:
    """What the tour measured, section by section, for ``results.json`` and ``report.md``.

    Attributes:
        environment: :func:`benchkit.report.environment` of the run.
        plan: the model and attention sections' plan.
        model_rows, attention_rows: :func:`run_model_section` and :func:`benchkit.attention.run_sweep` rows.
        parallel, parallel_rows: the parallel check's plan and its rows
            (:func:`benchkit.parallel_check.parallel_checks`).
        accounting: :func:`benchkit.accounting.run_accounting` of the default settings.
        seconds: the tour's wall time.
    """

    environment: dict[str, Any]
    plan: TourPlan
    model_rows: list[dict[str, Any]]
    attention_rows: list[dict[str, Any]]
    parallel: ParallelPlan
    parallel_rows: list[dict[str, Any]]
    accounting: Accounting
    seconds: float

    @property
    def ok(self) -> bool:
        """Whether every parallel run agreed with single-process training within its tolerance."""
        return all(r["ok"] for r in self.parallel_rows)

    def rows(self) -> list[dict[str, Any]]:
        """Every section's rows, each with its ``section``: model, attention, parallel, accounting."""
        return (
            [{"section": "model", **r} for r in self.model_rows]
            + [{"section": "attention", **r} for r in self.attention_rows]
            + [{"section": "parallel", **r} for r in self.parallel_rows]
            + [{"section": "accounting", **r} for r in self.accounting.rows]
        )

    def flashattn2_note(self) -> str:
        """Which flashattn2 ran in the attention section, and what that means for its times."""
        backends = dict.fromkeys(r["backend"] for r in self.attention_rows if r["implementation"] == "flashattn2")
        return " ".join(f"flashattn2 ran as `{b}`: {BACKEND_NOTES.get(b, 'see the rows')}." for b in backends)

    def report(self, figures: dict[str, list[str]]) -> str:
        """``report.md``: the environment, each section's table and figures (``figures``: file names
        relative to the report, by section ``model``, ``attention``, ``accounting``)."""
        mp, parallel = self.plan.model, self.parallel
        environment_lines = "\n".join(f"- {key}: {value}" for key, value in self.environment.items())
        images = {section: "\n".join(map(_figure_markdown, names)) for section, names in figures.items()}
        return f"""# benchkit run

{environment_lines}
- wall time of the tour: {self.seconds:.0f} s

## 1. Model phase timings

Train steps of the reference Transformer (sizes {", ".join(mp.sizes)}), context {mp.context_length},
batch {mp.batch_size}, {mp.warmup} warm-up then {mp.steps} timed steps, device synchronized after
each phase; times in ms (mean unless named), MFU only on a GPU of known peak (`benchkit.flops`).

```
{format_table(table_rows(self.model_rows))}
```

{images.get("model", "")}

## 2. Attention

Causal attention on (1, H={self.plan.attention.heads}, N, D) inputs; medians in ms; peak memory only on CUDA.
`backend` is what computed each row. {self.flashattn2_note()}

```
{format_table(self.attention_rows, ATTENTION_COLUMNS)}
```

{images.get("attention", "")}

## 3. Data parallel and ZeRO-1 against one process

{parallel.describe()} ({parallel.reason}; see `benchkit.parallel_check.parallel_plan`).
Each rank trains its {parallel.batch_per_rank} of a global batch of {parallel.world_size * parallel.batch_per_rank} \
sequences of {parallel.context_length} tokens
for {parallel.steps} AdamW steps at lr {parallel.lr}; its parameters are compared with single-process training on
the whole batch (the largest difference over the ranks).
{check_method(parallel)} **{"PASS" if self.ok else "FAIL"}**

```
{format_table(self.parallel_rows, PARALLEL_COLUMNS)}
```

## 4. Accounting example

`benchkit accounting` with its defaults (formulas in its `--help` and the README); files in `accounting/`.

```
{format_table(self.accounting.rows, ACCOUNTING_COLUMNS)}
```

{images.get("accounting", "")}
"""
