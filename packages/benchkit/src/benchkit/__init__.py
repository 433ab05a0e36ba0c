"""trainsys-benchkit: where time and memory go in transformer training.

The ``benchkit`` command (:mod:`benchkit.cli`) has one subcommand per question;
``benchkit run`` is the end-to-end tour. The library underneath:

- :mod:`benchkit.model`: the reference Transformer LM and its named sizes;
- :mod:`benchkit.workload`: one training step of it, timed phase by phase;
- :mod:`benchkit.timing`: statistics and the device-synchronizing phase timer;
- :mod:`benchkit.flops`, :mod:`benchkit.memory`: model FLOPs / MFU, and memory accounting;
- :mod:`benchkit.report`, :mod:`benchkit.plot`, :mod:`benchkit.errors`: output conventions.
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
