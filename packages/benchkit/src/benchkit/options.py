"""The command-line options that several subcommands share, each defined once here.

- ``--device`` (:func:`add_device_argument`): auto, cpu, cuda or cuda:N, resolved
  by :func:`benchkit.devices.resolve_device`;
- ``--size`` (:func:`add_size_argument`): named model sizes; when it is not given,
  :func:`default_sizes` picks tiny on a CPU and the command's own sizes on a GPU;
- ``--nproc`` (:func:`add_nproc_argument`): numbers of ranks to start, one run per
  value (:func:`default_nproc` when not given);
- ``--precision``, ``--attention`` and the rest of a workload (:func:`add_workload_arguments`);
- what the distributed benchmarks share (:func:`add_rank_arguments`);
- ``--out``, ``--csv`` and ``--format`` (:func:`add_output_arguments`), and the note
  a run prints when ``--out`` holds an earlier run's files (:func:`earlier_results_note`).

Example::

    import argparse
    from benchkit.options import add_output_arguments, add_size_argument

    parser = argparse.ArgumentParser(prog="benchkit mine")
    add_size_argument(parser, gpu_sizes=("small", "xl"))
    add_output_arguments(parser, figures=True)
    args = parser.parse_args(["--size", "tiny", "--format", "svg"])  # args.out: benchkit-results/mine
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchkit.argtypes import output_folder, positive_float, positive_int
from benchkit.model import ATTENTION_BACKENDS, SIZES
from benchkit.plot import FORMATS
from benchkit.ranks import rank_device_type
from benchkit.training import PRECISIONS

__all__ = [
    "add_attention_argument",
    "add_device_argument",
    "add_nproc_argument",
    "add_output_arguments",
    "add_precision_argument",
    "add_rank_arguments",
    "add_size_argument",
    "add_workload_arguments",
    "default_nproc",
    "default_sizes",
    "earlier_results_note",
]

RESULTS_FOLDER = "benchkit-results"  # the default --out is RESULTS_FOLDER/<command>


def add_device_argument(parser: argparse.ArgumentParser, *, ranks: bool = False) -> None:
    """``--device``: auto (default), cpu, cuda or cuda:N, for :func:`benchkit.devices.resolve_device`.
    With ``ranks`` (the distributed benchmarks: one GPU per rank), the help says what each means there."""
    what = (
        "cuda: NCCL, one GPU per rank; cpu: gloo; auto (default): cuda if a GPU is visible"
        if ranks
        else "auto (default: cuda if a GPU is visible), cpu, cuda or cuda:N"
    )
    parser.add_argument("--device", default="auto", help=what)


def default_sizes(device: torch.device, gpu_sizes: Sequence[str]) -> list[str]:
    """The sizes measured when ``--size`` is not given: tiny on a CPU (it trains in seconds
    there), ``gpu_sizes`` (the command's own choice) on a GPU."""
    return ["tiny"] if device.type == "cpu" else list(gpu_sizes)


def add_size_argument(
    parser: argparse.ArgumentParser, *, gpu_sizes: Sequence[str], many: bool = True, what: str = "named model sizes"
) -> None:
    """``--size``: one or (with ``many``) several keys of :data:`benchkit.model.SIZES`;
    default None, for :func:`default_sizes` with ``gpu_sizes``."""
    parser.add_argument(
        "--size",
        choices=list(SIZES),
        default=None,
        **({"nargs": "+"} if many else {}),
        help=f"{what} (default: tiny on CPU, {' '.join(gpu_sizes)} on GPU)",
    )


def default_nproc(device: torch.device) -> list[int]:
    """The ranks started when ``--nproc`` is not given: one per visible GPU on CUDA, 2 on a CPU."""
    return [torch.cuda.device_count()] if device.type == "cuda" else [2]


def add_nproc_argument(parser: argparse.ArgumentParser) -> None:
    """``--nproc N [N ...]``: numbers of ranks to start on this node, one run per value; default
    None, for :func:`default_nproc`."""
    parser.add_argument(
        "--nproc",
        type=positive_int,
        nargs="+",
        default=None,
        metavar="N",
        help="numbers of ranks to start on this node, one run each (default: one per visible GPU "
        "on CUDA, 2 on CPU); ignored under torchrun",
    )


def add_precision_argument(
    parser: argparse.ArgumentParser, *, many: bool = False, default: Sequence[str] = ("fp32",)
) -> None:
    """``--precision``: one or (with ``many``) several of :data:`benchkit.training.PRECISIONS`."""
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=list(default) if many else default[0],
        **({"nargs": "+"} if many else {}),
        help=f"fp32, bf16 autocast, or fp16 autocast with loss scaling (default: {' '.join(default)})",
    )


def add_attention_argument(parser: argparse.ArgumentParser) -> None:
    """``--attention``: the model's attention backend, one of :data:`benchkit.model.ATTENTION_BACKENDS`."""
    parser.add_argument(
        "--attention", choices=ATTENTION_BACKENDS, default="sdpa", help="attention backend (default: sdpa)"
    )


def add_workload_arguments(parser: argparse.ArgumentParser, *, sweep: bool, gpu_sizes: Sequence[str]) -> None:
    """The options that pick a workload (:class:`benchkit.workload.WorkloadSettings`): ``--size``,
    ``--context-length``, ``--batch-size``, ``--precision``, ``--attention``, ``--compile``,
    ``--device``. With ``sweep``, ``--size``, ``--context-length`` and ``--precision`` take several values."""
    many = {"nargs": "+"} if sweep else {}
    add_size_argument(parser, gpu_sizes=gpu_sizes, many=sweep)
    parser.add_argument(
        "--context-length",
        type=positive_int,
        default=[256] if sweep else 256,
        metavar="T",
        **many,
        help="tokens per sequence (default: 256)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=4, metavar="B", help="sequences per step (default: 4)"
    )
    add_precision_argument(parser, many=sweep)
    add_attention_argument(parser)
    parser.add_argument("--compile", action="store_true", help="run the model through torch.compile")
    add_device_argument(parser)


def add_rank_arguments(
    parser: argparse.ArgumentParser, *, gpu_sizes: Sequence[str], context_length: int, timeout_s: float
) -> None:
    """The options of the distributed benchmarks that mean the same in each: ``--size``,
    ``--context-length`` (default ``context_length``), ``--batch-size`` (per rank),
    ``--device``, ``--nproc`` and ``--timeout-s`` (default ``timeout_s``, see
    :func:`benchkit.ranks.run_on_ranks`)."""
    add_size_argument(parser, gpu_sizes=gpu_sizes)
    parser.add_argument(
        "--context-length",
        type=positive_int,
        default=context_length,
        metavar="T",
        help=f"tokens per sequence (default: {context_length})",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=4,
        metavar="B",
        help="sequences per rank and step, each rank its own (default: 4)",
    )
    add_device_argument(parser, ranks=True)
    add_nproc_argument(parser)
    parser.add_argument(
        "--timeout-s",
        type=positive_float,
        default=timeout_s,
        metavar="S",
        help=f"deadline of each spawned group of ranks, and the process group timeout (default: {timeout_s:g})",
    )


def rank_plan_fields(args: argparse.Namespace, device: torch.device, gpu_sizes: Sequence[str]) -> dict[str, Any]:
    """The :class:`benchkit.ranks.RankPlan` fields from the options of :func:`add_rank_arguments`
    (and ``--warmup``/``--steps``), with ``--device`` resolved to ``device``."""
    return {
        "sizes": tuple(args.size or default_sizes(device, gpu_sizes)),
        "context_length": args.context_length,
        "batch_size": args.batch_size,
        "warmup": args.warmup,
        "steps": args.steps,
        "device_type": rank_device_type(device),
    }


def add_output_arguments(parser: argparse.ArgumentParser, command: str | None = None, *, figures: bool = False) -> None:
    """Add ``--out DIR`` (default ``benchkit-results/<command>``), ``--csv`` and, with
    ``figures``, ``--format`` (png, svg or pdf, for :func:`benchkit.plot.save_figure`).

    ``command`` defaults to the last word of ``parser.prog`` (``"benchkit model"``
    gives ``model``), which is the subcommand's name for parsers made by :mod:`benchkit.cli`.
    ``--out``, given or not, is checked while parsing (:func:`benchkit.argtypes.output_folder`):
    a path that cannot become a folder is an argparse error before the command starts.
    """
    name = command or parser.prog.split()[-1]
    parser.add_argument(
        "--out",
        type=output_folder,
        default=f"{RESULTS_FOLDER}/{name}",  # a string, so that argparse checks it with the type too
        metavar="DIR",
        help=f"folder for the result files (default: {RESULTS_FOLDER}/{name}); files of an earlier run "
        f"there are replaced",
    )
    parser.add_argument("--csv", action="store_true", help="also write the rows as CSV")
    if figures:
        parser.add_argument(
            "--format", choices=FORMATS, default="png", help="file format of the figures (default: png)"
        )


def earlier_results_note(out: Path) -> str | None:
    """What a run writing into ``out`` should tell the user first, if ``out`` already holds
    files (an earlier run's): that files of the same name are replaced. None for a new or empty folder."""
    if not out.is_dir():
        return None
    earlier = sorted(path.name for path in out.iterdir())
    if not earlier:
        return None
    shown = ", ".join(earlier[:3]) + (", ..." if len(earlier) > 3 else "")
    return (
        f"{out} already holds {len(earlier)} file{'s' if len(earlier) > 1 else ''} ({shown}); this run "
        f"replaces those it writes again. Use --out DIR to keep runs apart"
    )
