"""trainsys-benchkit: where time and memory go in transformer training.

The ``benchkit`` command (:mod:`benchkit.cli`) has one subcommand per question;
``benchkit run`` is the end-to-end tour. Each subcommand (:mod:`benchkit.commands`)
parses its options, calls the library and prints and saves what it returns. The library:

- :mod:`benchkit.model`: the reference Transformer LM and its named sizes;
- :mod:`benchkit.training`: one training step (model, batch, precision, optimizer,
  optional wrapper), timed phase by phase; :mod:`benchkit.workload`: the reference
  model's workload and its benchmark row;
- :mod:`benchkit.timing`: statistics and the device-synchronizing phase timer;
- :mod:`benchkit.flops`, :mod:`benchkit.memory`: model FLOPs / MFU, and memory;
- :mod:`benchkit.profiling`, :mod:`benchkit.precision`, :mod:`benchkit.attention`,
  :mod:`benchkit.accounting`: one measurement (or model) each;
- :mod:`benchkit.ranks`, :mod:`benchkit.data_parallel`, :mod:`benchkit.zero`,
  :mod:`benchkit.allreduce`, :mod:`benchkit.parallel_check`: the distributed ones;
- :mod:`benchkit.tour`: what ``benchkit run`` measures and its report;
- :mod:`benchkit.report`, :mod:`benchkit.plot`, :mod:`benchkit.options`,
  :mod:`benchkit.devices`, :mod:`benchkit.units`, :mod:`benchkit.argtypes`,
  :mod:`benchkit.errors`: output, figures, options and shared names.
"""

from benchkit.__about__ import __version__
from benchkit.errors import BenchkitError
from benchkit.model import SIZES, ModelConfig, TransformerLM, lm_loss, model_config, parameter_count
from benchkit.timing import PhaseTimer, Stats, summarize

__all__ = [
    "SIZES",
    "BenchkitError",
    "ModelConfig",
    "PhaseTimer",
    "Stats",
    "TransformerLM",
    "__version__",
    "lm_loss",
    "model_config",
    "parameter_count",
    "summarize",
]
