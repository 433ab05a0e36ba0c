"""trainsys-ddp: data-parallel training wrappers, from naive to bucketed overlap.

All four wrappers share one contract (:class:`DataParallel`): wrap the model,
run forward and backward on this rank's slice of the batch, then call
``finish_gradient_synchronization()`` before ``optimizer.step()``.

- :class:`NaiveDDP`: after backward, one blocking all-reduce per gradient.
- :class:`FlatDDP`: after backward, one all-reduce of all gradients, flattened.
- :class:`OverlapDDP`: one asynchronous all-reduce per gradient, started during backward.
- :class:`BucketedDDP`: gradients in buckets; each bucket's all-reduce starts during backward.

:mod:`ddp.launch` starts N local processes for tests and single-node runs.
"""

from ddp.__about__ import __version__
from ddp.base import DataParallel
from ddp.bucketed import BucketedDDP
from ddp.errors import GradientSyncError
from ddp.flat import FlatDDP
from ddp.naive import NaiveDDP
from ddp.overlap import OverlapDDP

__all__ = [
    "BucketedDDP",
    "DataParallel",
    "FlatDDP",
    "GradientSyncError",
    "NaiveDDP",
    "OverlapDDP",
    "__version__",
]
