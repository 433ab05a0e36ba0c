"""BucketedDDP rebuilds its buckets once, in rank 0's gradient readiness order, and loses nothing.

The model registers its layers in the reverse of the order it uses them, so the
first bucket layout (reverse registration order) is wrong and the rebuild must
change it. Odd ranks compute two same-shaped branches in the other order, so
their gradients become ready in a different order than rank 0's: the buckets
must still be identical on every rank (rank 0's order, broadcast). One layer is
used only from the second step on, so it has no gradient anywhere during the
step the order is taken from. Each rank returns its bucket layouts, the
averaged gradients of every step and its final parameters; the parent compares
them with one process training on the whole batches.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ddp import BucketedDDP
from ddp.launch import spawn

pytestmark = pytest.mark.distributed

IN, HIDDEN, OUT = 5, 8, 3
SAMPLES_PER_RANK = 2
STEPS = 4
LR = 0.1
INIT_SEED = 99  # rank r builds its model from INIT_SEED + r; the reference is rank 0's

# (name, wrapper factory). 1e-9 MiB: one bucket per parameter, so the layout spells out the
# order; 3e-4 MiB (314 bytes): a 256-byte weight and a bias or two share a bucket.
CONFIGS = [
    ("per-parameter", lambda m: BucketedDDP(m, bucket_size_mb=1e-9)),
    ("grouped", lambda m: BucketedDDP(m, bucket_size_mb=3e-4)),
    ("grouped-bf16", lambda m: BucketedDDP(m, bucket_size_mb=3e-4, compress_bf16=True)),
    ("not-rebuilt", lambda m: BucketedDDP(m, bucket_size_mb=1e-9, rebuild_buckets=False)),
]


class ReversedNet(nn.Module):
    """Layers registered last-used first; ``late`` joins from step 1 on. (B, IN) -> (B, OUT)."""

    def __init__(self) -> None:
        super().__init__()
        self.late = nn.Linear(IN, OUT)
        self.last = nn.Linear(HIDDEN, OUT)
        self.right = nn.Linear(HIDDEN, HIDDEN)
        self.left = nn.Linear(HIDDEN, HIDDEN)
        self.first = nn.Linear(IN, HIDDEN)

    def forward(self, x: torch.Tensor, step: int, swap: bool) -> torch.Tensor:
        h = torch.tanh(self.first(x))
        if swap:  # same math, other autograd order
            r = self.right(h)
            left = self.left(h)
        else:
            left = self.left(h)
            r = self.right(h)
        out = self.last(torch.tanh(left) * torch.sigmoid(r))
        return out + self.late(x) if step > 0 else out


def make_batches(seed: int, world_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    size = world_size * SAMPLES_PER_RANK
    return [(torch.randn(size, IN, generator=gen), torch.randn(size, OUT, generator=gen)) for _ in range(STEPS)]


def train(batches, rank: int = 0, world_size: int = 1, make_wrapper=None):
    """Plain SGD (written out: torch.optim imports torch._dynamo, seconds per process); returns
    (model, wrapper or None, [averaged gradients after each step], [bucket layout after each step],
    names in the order this rank's gradients became ready in step 0)."""
    torch.manual_seed(INIT_SEED + rank)
    model = ReversedNet()
    names = {param: name for name, param in model.named_parameters()}
    ready: list[str] = []
    for param in model.parameters():
        param.register_post_accumulate_grad_hook(lambda p: ready.append(names[p]))
    wrapper = make_wrapper(model) if make_wrapper else None
    trained = wrapper if wrapper is not None else model
    grads, layouts = [], [wrapper.bucket_members] if wrapper is not None else []
    for step, (x, y) in enumerate(batches):
        trained.zero_grad(set_to_none=step % 2 == 1)
        xm, ym = x.chunk(world_size)[rank], y.chunk(world_size)[rank]
        (trained(xm, step, rank % 2 == 1) - ym).square().mean().backward()
        if step == 0:
            ready_in_step_0 = list(ready)
        if wrapper is not None:
            wrapper.finish_gradient_synchronization()
            layouts.append(wrapper.bucket_members)
        grads.append(
            {n: torch.zeros_like(p) if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
        )
        with torch.no_grad():
            for param in model.parameters():
                if param.grad is not None:
                    param -= LR * param.grad
    return model, wrapper, grads, layouts, ready_in_step_0


def _ranks(rank, world_size, data_seed):
    out = {}
    for name, make_wrapper in CONFIGS:
        model, wrapper, grads, layouts, ready = train(
            make_batches(data_seed, world_size), rank, world_size, make_wrapper
        )
        params = dict(model.named_parameters())
        out[name] = {
            "params": {n: p.detach().clone() for n, p in params.items()},
            "grads": grads,
            "layouts": layouts,
            "ready": ready,
            # after the rebuild the gradients of one bucket still live in one buffer, as views
            "storages_per_bucket": [
                len({params[n].grad.untyped_storage().data_ptr() for n in bucket}) for bucket in wrapper.bucket_members
            ],
        }
    return out


@pytest.mark.parametrize("world_size", [2, 3])
def test_rebuilt_buckets_follow_rank0_readiness_and_training_matches_one_process(world_size):
    data_seed = int(torch.randint(0, 2**30, ()).item())
    results = spawn(_ranks, world_size, args=(data_seed,), timeout_s=120)
    reference, _, ref_grads, _, _ = train(make_batches(data_seed, world_size))
    registered = [n for n, _ in ReversedNet().named_parameters()]

    rank0 = results[0]["per-parameter"]
    # the test means something: odd ranks' gradients became ready in another order than rank 0's
    assert results[1]["per-parameter"]["ready"] != rank0["ready"]
    assert not any(n.startswith("late.") for n in rank0["ready"])  # late had no gradient in step 0
    expected_order = rank0["ready"] + ["late.bias", "late.weight"]  # then the rest, in the first layout's order
    assert rank0["layouts"][0] == [[n] for n in reversed(registered)]
    assert rank0["layouts"][1] == [[n] for n in expected_order] != rank0["layouts"][0]

    for name, _ in CONFIGS:
        mine0 = results[0][name]
        layouts = mine0["layouts"]
        assert all(layout == layouts[1] for layout in layouts[1:]), f"{name}: rebuilt more than once"
        if name == "not-rebuilt":
            assert layouts[1] == layouts[0]
        else:
            assert [n for bucket in layouts[1] for n in bucket] == expected_order, name
        if name == "grouped":
            assert len(layouts[1]) < len(registered)  # the rebuild kept the cap: some buckets hold several
        tol = dict(rtol=1e-5, atol=1e-6)  # float32 summation-order differences only
        # bf16 on the wire: each rank's gradient and their sum are rounded to 8 significant bits, an
        # absolute error of about 2**-8 of the summands' size (O(1) here), however small their average.
        grad_tol = dict(rtol=1e-2, atol=1e-2) if name.endswith("bf16") else tol
        tol = dict(rtol=1e-2, atol=1e-3) if name.endswith("bf16") else tol
        for rank, result in enumerate(results):
            mine = result[name]
            assert mine["layouts"] == layouts, f"{name} rank {rank}: buckets differ from rank 0's"
            assert mine["storages_per_bucket"] == [1] * len(layouts[-1]), f"{name} rank {rank}"
            for step in range(STEPS):  # step 0 includes the rebuild: its gradients must survive it
                for n, expected in ref_grads[step].items():
                    torch.testing.assert_close(
                        mine["grads"][step][n],
                        expected,
                        **grad_tol,
                        msg=lambda m: f"{name} rank {rank} step {step} grad {n}: {m}",
                    )
            for n, p in reference.named_parameters():
                torch.testing.assert_close(
                    mine["params"][n], p.detach(), **tol, msg=lambda m: f"{name} rank {rank} {n}: {m}"
                )
                assert torch.equal(mine["params"][n], mine0["params"][n]), (name, rank, n)
