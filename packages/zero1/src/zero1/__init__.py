"""trainsys-zero1: ZeRO stage 1, an optimizer wrapper that shards optimizer state across data-parallel ranks.

- :class:`ShardedOptimizer`: the optimizer wrapper.
- :func:`save_checkpoint` / :func:`load_checkpoint`: the job's model and optimizer
  on disk, one file per rank, committed atomically, verified on every load, loadable
  at any world size (:mod:`zero1.checkpoint_files`); :func:`read_checkpoint` reads one
  in a single process.

Example::

    import torch
    from zero1 import ShardedOptimizer

    # on every rank, after torch.distributed.init_process_group(...)
    optimizer = ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-3)
"""

from zero1.__about__ import __version__
from zero1.checkpoint import merge_sharded_state_dicts
from zero1.checkpoint_files import (
    CheckpointError,
    CheckpointInfo,
    list_checkpoints,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from zero1.memory import MemoryPrediction, predict_memory
from zero1.optimizer import ShardedOptimizer
from zero1.partition import partition_parameters

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "MemoryPrediction",
    "ShardedOptimizer",
    "__version__",
    "list_checkpoints",
    "load_checkpoint",
    "merge_sharded_state_dicts",
    "partition_parameters",
    "predict_memory",
    "read_checkpoint",
    "save_checkpoint",
    "verify_checkpoint",
]
