"""Dropping a wrapper frees the model: the gradient hooks must not keep it alive.

The hooks sit in autograd's C++ state, invisible to Python's garbage collector;
a strong reference from a hook to the wrapper would leak every wrapped model and
its gradients.
"""

import gc
import weakref

import pytest
import torch

from ddp import BucketedDDP, FlatDDP, NaiveDDP, OverlapDDP
from ddp.launch import spawn

pytestmark = pytest.mark.distributed


def _freed_after_del(rank, world_size):
    freed = {}
    for wrapper_cls in (NaiveDDP, FlatDDP, OverlapDDP, BucketedDDP):
        net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
        wrapper = wrapper_cls(net)
        wrapper(torch.randn(4, 8)).square().sum().backward()
        wrapper.finish_gradient_synchronization()
        weight, wrapper_ref = weakref.ref(net[0].weight), weakref.ref(wrapper)
        del wrapper, net
        gc.collect()
        freed[wrapper_cls.__name__] = weight() is None and wrapper_ref() is None
    return freed


def test_dropping_the_wrapper_frees_model_and_gradients():
    (freed,) = spawn(_freed_after_del, 1, timeout_s=60)
    assert freed == {"NaiveDDP": True, "FlatDDP": True, "OverlapDDP": True, "BucketedDDP": True}
