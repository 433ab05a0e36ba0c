"""ddp.BucketedDDP + zero1.ShardedOptimizer on 2 processes train like one process on the whole batch.

The reference Transformer (benchkit.model, size tiny) is trained for a few AdamW
steps: once in this process on the full batch, once on 2 gloo ranks that each
see half of every batch, with gradients averaged by BucketedDDP and the AdamW
state sharded by ShardedOptimizer. The ranks start from different random
parameters, so BucketedDDP's broadcast from rank 0 is exercised. Half-way, the
2 ranks save a checkpoint (zero1.save_checkpoint); one process resumes from it
(zero1.load_checkpoint, world size 1) and must end where the others do.
"""

import random

import pytest
import torch

from benchkit.model import TransformerLM, lm_loss, model_config, random_batch
from ddp import BucketedDDP
from ddp.launch import spawn
from zero1 import ShardedOptimizer, load_checkpoint, save_checkpoint

pytestmark = pytest.mark.distributed

WORLD_SIZE = 2
BATCH = 4  # whole batch; each rank trains on BATCH // WORLD_SIZE sequences
CONTEXT = 16
STEPS = 6
SAVE_AT = 3  # steps taken when the checkpoint is saved
LR = 1e-3
# The data-parallel gradient is the same mean computed in another order (per-rank
# means, then their average), so it agrees with the full-batch one to float32
# rounding, not bitwise. AdamW divides by sqrt(v): for an element whose gradient is
# near zero, that rounding can move its update by a visible fraction of one step
# (lr). Simulating this split in one process over 12 seeds gave differences up to
# 0.016 * lr; 0.1 * lr still tells apart any real error (a missed average, a stale
# or unsynchronized shard moves parameters by whole steps).
ATOL = 0.1 * LR


def _batches(seed):
    gen = torch.Generator().manual_seed(seed)
    config = model_config("tiny", CONTEXT)
    return [random_batch(config, BATCH, generator=gen) for _ in range(STEPS)]


def _model(seed):
    torch.manual_seed(seed)
    return TransformerLM(model_config("tiny", CONTEXT))


def _train_sharded(rank, world_size, seed, directory, resume):
    """Train STEPS steps, saving a checkpoint after SAVE_AT; or, if ``resume``, load it and do the rest."""
    model = BucketedDDP(_model(seed + rank + 100 * resume), bucket_size_mb=0.25)
    optimizer = ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=LR)
    done = load_checkpoint(directory, model.module, optimizer).step if resume else 0
    rows = slice(rank * BATCH // world_size, (rank + 1) * BATCH // world_size)
    for inputs, targets in _batches(seed)[done:]:
        optimizer.zero_grad(set_to_none=False)  # keeps the gradients as bucket views
        lm_loss(model(inputs[rows]), targets[rows]).backward()
        model.finish_gradient_synchronization()
        optimizer.step()
        done += 1
        if done == SAVE_AT and not resume:
            save_checkpoint(directory, done, model.module, optimizer)
    state_elements = sum(s["exp_avg"].numel() for s in optimizer.state.values())
    return [p.detach() for p in model.parameters()], state_elements


def test_bucketed_ddp_with_sharded_adamw_matches_single_process_training(tmp_path):
    seed = random.randrange(2**31)
    results = spawn(_train_sharded, WORLD_SIZE, args=(seed, str(tmp_path), False), timeout_s=120)
    [(resumed, _)] = spawn(_train_sharded, 1, args=(seed, str(tmp_path), True), timeout_s=120)

    reference = _model(seed)  # rank 0's initial parameters, which BucketedDDP broadcasts
    optimizer = torch.optim.AdamW(reference.parameters(), lr=LR)
    for inputs, targets in _batches(seed):
        optimizer.zero_grad()
        lm_loss(reference(inputs), targets).backward()
        optimizer.step()

    names = [name for name, _ in reference.named_parameters()]
    for rank, (params, _) in enumerate(results):
        for name, got, want in zip(names, params, reference.parameters(), strict=True):
            torch.testing.assert_close(
                got, want.detach(), rtol=0, atol=ATOL, msg=lambda m: f"rank {rank}, {name} (seed {seed}): {m}"
            )
        for got, other in zip(params, results[0][0]):
            assert torch.equal(got, other), "ranks hold different parameters after the broadcast"
    for name, got, want in zip(names, resumed, reference.parameters(), strict=True):
        torch.testing.assert_close(
            got, want.detach(), rtol=0, atol=ATOL, msg=lambda m: f"resumed at world size 1, {name} (seed {seed}): {m}"
        )
    # Each rank kept AdamW state for its share only; together exactly one copy.
    total = sum(p.numel() for p in reference.parameters())
    assert sum(elements for _, elements in results) == total
    assert all(elements < total for _, elements in results)
