"""ShardedOptimizer against the unsharded optimizer: bitwise-equal parameters, step after step.

Every rank computes the same gradients (same seed, same data): that is what a
data-parallel wrapper hands the optimizer. Each spawned run checks many
scenarios, because starting processes is the expensive part.
"""

import copy
import random

import pytest
import torch
import torch.distributed as dist
from torch import nn

from ddp.launch import spawn
from zero1 import ShardedOptimizer, load_checkpoint, merge_sharded_state_dicts, read_checkpoint, save_checkpoint

pytestmark = pytest.mark.distributed

STEPS = 12
TIMEOUT_S = 120


class _Net(nn.Module):
    """Tied embedding/head, a frozen layer, a branch unused on odd steps, a float64 and a non-contiguous parameter."""

    vocab = 11

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(self.vocab, 8)
        self.hidden = nn.Linear(8, 16)
        self.gate = nn.Linear(8, 16, bias=False)
        self.out = nn.Linear(16, 8)
        self.frozen = nn.Linear(8, 8)
        self.frozen.requires_grad_(False)
        self.sometimes = nn.Linear(8, 8)
        self.scale = nn.Parameter(torch.rand(8, dtype=torch.float64) + 0.5)
        self.mix = nn.Parameter(torch.randn(8, 8).t() * 0.1)  # a transposed view: not contiguous
        self.head = nn.Linear(8, self.vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens, use_sometimes):
        x = self.embed(tokens)
        x = x + self.out(torch.relu(self.hidden(x)) * self.gate(x)) + self.frozen(x)
        if use_sometimes:
            x = x + self.sometimes(x)
        x = x + x @ self.mix
        return self.head(x * self.scale.float())


def _backward(model, seed, step):
    """Same gradients on every rank: the data depends on (seed, step) only."""
    gen = torch.Generator().manual_seed(seed * 1000 + step)
    device = next(model.parameters()).device
    tokens = torch.randint(0, _Net.vocab, (4, 6), generator=gen).to(device)
    targets = torch.randint(0, _Net.vocab, (4, 6), generator=gen).to(device)
    logits = model(tokens, use_sometimes=step % 2 == 0)
    nn.functional.cross_entropy(logits.reshape(-1, _Net.vocab), targets.reshape(-1)).backward()


def _train(model, opt, seed, steps):
    """zero_grad, backward on the data of each step in ``steps``, optimizer step."""
    for step in steps:
        opt.zero_grad()
        _backward(model, seed, step)
        opt.step()


def _split(model):
    """(embedding and hidden-layer parameters, all the others): two groups to give different options."""
    first = list(model.embed.parameters()) + list(model.hidden.parameters())
    return first, [p for p in model.parameters() if all(p is not q for q in first)]


def _assert_same(ref_params, sharded_params, what):
    for i, (a, b) in enumerate(zip(ref_params, sharded_params, strict=True)):
        assert torch.equal(a, b), f"{what}: parameter {i} differs by {(a - b).abs().max().item()}"


def _assert_state_only_for_owned(opt, label):
    params = [p for g in opt.param_groups for p in g["params"]]
    owned = {p for p, owner in zip(params, opt.owners) if owner == opt.rank}
    assert all(p in owned for p in opt.state), f"{label}: state for a parameter this rank does not own"
    local = [p for g in opt.local_optimizer.param_groups for p in g["params"]]
    assert len(local) == len(owned) and set(local) == owned, f"{label}: local optimizer holds other params"
    mine = torch.tensor(opt.owners, device=params[0].device)  # NCCL needs CUDA tensors
    everyone = [torch.empty_like(mine) for _ in range(opt.world_size)]
    dist.all_gather(everyone, mine)  # (not all_gather_object: it needs NumPy, which zero1's env lacks)
    assert all(torch.equal(o, mine) for o in everyone), f"{label}: ranks disagree on the partition"


def _scenarios():
    """(label, optimizer_cls, options, ShardedOptimizer options, groups_fn)."""

    def all_params(model):
        return model.parameters()  # a generator, as users pass it

    def two_groups(model):
        first, rest = _split(model)
        return [{"params": first, "lr": 0.05}, {"params": rest, "weight_decay": 0.0}]

    adamw = torch.optim.AdamW
    sgd = torch.optim.SGD
    return [
        ("AdamW default", adamw, dict(lr=1e-2, weight_decay=0.1), {}, all_params),
        (
            "AdamW foreach per_parameter",
            adamw,
            dict(lr=1e-2, foreach=True),
            dict(broadcast_mode="per_parameter"),
            all_params,
        ),
        ("AdamW fused tiny buckets", adamw, dict(lr=1e-2, fused=True), dict(bucket_size_mb=300 / 2**20), all_params),
        ("AdamW amsgrad one bucket", adamw, dict(lr=1e-2, amsgrad=True), dict(bucket_size_mb=None), all_params),
        ("SGD momentum", sgd, dict(lr=0.1, momentum=0.9, weight_decay=1e-3), {}, all_params),
        ("SGD nesterov groups", sgd, dict(lr=0.1, momentum=0.9, nesterov=True), dict(bucket_size_mb=None), two_groups),
        ("AdamW groups", adamw, dict(lr=1e-2), dict(broadcast_mode="per_parameter"), two_groups),
    ]


def _check_matches_unsharded(rank, world_size, seed):
    _check_scenarios(seed, torch.device("cpu"))
    _check_comparison_sees_last_bits(seed)
    _check_add_param_group(rank, world_size, seed)
    _check_more_ranks_than_params(rank, world_size, seed)
    _check_state_balance(rank, world_size)
    _check_mixed_devices_need_explicit_foreach()
    return True


def _check_scenarios(seed, device):
    """Every scenario of _scenarios(), STEPS steps, parameters and state bitwise equal to the reference."""
    for label, cls, options, sharding, groups_fn in _scenarios():
        torch.manual_seed(seed)
        ref_model = _Net().to(device)
        model = copy.deepcopy(ref_model)
        ref = cls(groups_fn(ref_model), **options)
        opt = ShardedOptimizer(groups_fn(model), cls, **sharding, **options)
        for step in range(STEPS):
            for o, m in ((ref, ref_model), (opt, model)):
                _train(m, o, seed, [step])
            _assert_same(ref_model.parameters(), model.parameters(), f"{label}, step {step}")
            if step == STEPS // 2:  # a learning-rate change (what a scheduler does) reaches the shards
                for o in (ref, opt):
                    for g in o.param_groups:
                        g["lr"] *= 0.5
        _assert_state_only_for_owned(opt, label)
        twin = dict(zip(model.parameters(), ref_model.parameters()))
        for p, state in opt.state.items():  # the state itself equals the reference's, bitwise
            assert state.keys() == ref.state[twin[p]].keys(), label
            for key, value in state.items():
                assert torch.equal(value, ref.state[twin[p]][key]), f"{label}: state {key!r} differs"
        opt.zero_grad()
        assert all(p.grad is None for p in model.parameters()), f"{label}: zero_grad missed a parameter"


def _check_comparison_sees_last_bits(seed):
    """The bitwise comparison can fail: fused AdamW against the for-loop AdamW differs in the last bits.

    For about one seed in twenty the two happen to agree bitwise after STEPS steps,
    so four consecutive seeds are tried (all four on every rank, which keeps the
    ranks' collectives in step) and at least one must differ.
    """
    differs = []
    for attempt in range(4):
        torch.manual_seed(seed + attempt)
        ref_model = _Net()
        model = copy.deepcopy(ref_model)
        ref = torch.optim.AdamW(ref_model.parameters(), lr=1e-2, foreach=False)
        opt = ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-2, fused=True)
        for step in range(STEPS):
            for o, m in ((ref, ref_model), (opt, model)):
                _train(m, o, seed + attempt, [step])
        differs.append(not all(torch.equal(a, b) for a, b in zip(ref_model.parameters(), model.parameters())))
    assert any(differs)


def _check_mixed_devices_need_explicit_foreach():
    """With foreach=None a shard could pick another implementation than the whole group would."""
    mixed = [nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(3, device="meta"))]
    with pytest.raises(ValueError, match="foreach"):
        ShardedOptimizer(mixed, torch.optim.AdamW)
    ShardedOptimizer(mixed, torch.optim.AdamW, foreach=False)


def _check_add_param_group(rank, world_size, seed):
    torch.manual_seed(seed)
    ref_model = _Net()
    model = copy.deepcopy(ref_model)
    ref = torch.optim.AdamW(_split(ref_model)[0], lr=1e-2)
    opt = ShardedOptimizer(_split(model)[0], torch.optim.AdamW, lr=1e-2)
    for step in range(STEPS):
        if step == 3:  # train the rest from now on, with its own options
            for o, m in ((ref, ref_model), (opt, model)):
                o.add_param_group({"params": _split(m)[1], "lr": 3e-2, "betas": (0.8, 0.99)})
        for o, m in ((ref, ref_model), (opt, model)):
            _train(m, o, seed, [step])
        _assert_same(ref_model.parameters(), model.parameters(), f"add_param_group, step {step}")
    assert opt.param_groups[1]["betas"] == (0.8, 0.99) and opt.param_groups[1]["lr"] == 3e-2
    assert opt.param_groups[1]["weight_decay"] == ref.param_groups[1]["weight_decay"]  # filled-in default
    _assert_state_only_for_owned(opt, "add_param_group")
    assert len(opt.local_optimizer.param_groups) == 2


def _check_more_ranks_than_params(rank, world_size, seed):
    """world_size - 1 parameters: at least one rank owns nothing and still takes part."""
    torch.manual_seed(seed)
    ref_params = [nn.Parameter(torch.randn(3, 2)) for _ in range(world_size - 1)]
    params = [nn.Parameter(p.detach().clone()) for p in ref_params]
    ref = torch.optim.SGD(ref_params, lr=0.1, momentum=0.9)
    opt = ShardedOptimizer(params, torch.optim.SGD, lr=0.1, momentum=0.9)
    assert sorted(opt.owners) == list(range(world_size - 1))
    gen = torch.Generator().manual_seed(seed)
    for step in range(STEPS):
        grads = [torch.randn(3, 2, generator=gen) for _ in params]
        for ps in (ref_params, params):
            for p, g in zip(ps, grads):
                p.grad = g.clone()
        ref.step()
        opt.step()
        _assert_same(ref_params, params, f"more ranks than params, step {step}")
    if rank == world_size - 1:
        assert len(opt.state) == 0


def _check_state_balance(rank, world_size):
    """Per-rank AdamW state within (total / N + largest) elements x 2 tensors (the partition's bound)."""
    sizes = [7, 300, 45, 45, 128, 1, 64, 250, 3]
    params = [nn.Parameter(torch.zeros(n)) for n in sizes]
    opt = ShardedOptimizer(params, torch.optim.AdamW, lr=1e-3)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    elements = sum(s["exp_avg"].numel() + s["exp_avg_sq"].numel() for s in opt.state.values())
    assert elements <= 2 * (sum(sizes) / world_size + max(sizes))
    total = torch.tensor([elements])
    dist.all_reduce(total)
    assert total.item() == 2 * sum(sizes)


# ---------------------------------------------------------------- checkpoints

SAVE_AT, MORE_STEPS = 4, 10


def _checkpoint_groups(model):
    """Two groups with different learning rates; the frozen layer included, as users often do."""
    first, rest = _split(model)
    return [{"params": first, "lr": 2e-2}, {"params": rest, "lr": 5e-3, "weight_decay": 0.0}]


def _cloned(tensors):
    return [t.detach().clone() for t in tensors]


def _net_from(snapshot):
    """A _Net holding the parameter values in ``snapshot``."""
    model = _Net()
    with torch.no_grad():
        for p, saved in zip(model.parameters(), snapshot, strict=True):
            p.copy_(saved)
    return model


def _save_at_two(rank, world_size, seed, directory):
    """Train SAVE_AT steps, checkpoint three ways, then go on uninterrupted; resume from the own shard too.

    The three ways: consolidated, this rank's shard, and zero1.save_checkpoint into ``directory``.
    """
    torch.manual_seed(seed)
    model = _Net()
    opt = ShardedOptimizer(_checkpoint_groups(model), torch.optim.AdamW, lr=1e-2)
    _train(model, opt, seed, range(SAVE_AT))
    with pytest.raises(RuntimeError, match="consolidate_state_dict"):
        opt.state_dict()
    opt.consolidate_state_dict(to=0)
    consolidated = copy.deepcopy(opt.state_dict()) if rank == 0 else None
    if rank == 1:
        with pytest.raises(RuntimeError, match="consolidate_state_dict"):
            opt.state_dict()
    shard = copy.deepcopy(opt.sharded_state_dict())
    snapshot = _cloned(model.parameters())
    save_checkpoint(directory, SAVE_AT, model, opt, metadata={"seed": seed})

    _train(model, opt, seed, range(SAVE_AT, SAVE_AT + MORE_STEPS))
    uninterrupted = _cloned(model.parameters())

    resumed_model = _net_from(snapshot)
    resumed = ShardedOptimizer(_checkpoint_groups(resumed_model), torch.optim.AdamW, lr=1.0)
    resumed.load_state_dict(copy.deepcopy(shard))  # loading aliases the step tensors, as in torch.optim
    _train(resumed_model, resumed, seed, range(SAVE_AT, SAVE_AT + MORE_STEPS))
    _assert_same(uninterrupted, resumed_model.parameters(), "resumed from the sharded state dict")
    return consolidated, shard, snapshot, uninterrupted


def _resume(rank, world_size, seed, checkpoint, snapshot, foreign_shard, directory):
    """Resume at this world size, from the consolidated dict and from save_checkpoint's files.

    Returns the final parameters of both runs.
    """
    torch.manual_seed(seed + 1)  # other initial values: the checkpoint must replace them all
    from_files = _Net()
    from_files_opt = ShardedOptimizer(_checkpoint_groups(from_files), torch.optim.AdamW, lr=1.0)
    info = load_checkpoint(directory, from_files, from_files_opt)
    assert (info.step, info.world_size, info.metadata) == (SAVE_AT, 2, {"seed": seed})
    _train(from_files, from_files_opt, seed, range(SAVE_AT, SAVE_AT + MORE_STEPS))

    model = _net_from(snapshot)
    opt = ShardedOptimizer(_checkpoint_groups(model), torch.optim.AdamW, lr=1.0)
    with pytest.raises(ValueError, match="merge_sharded_state_dicts"):
        opt.load_state_dict(foreign_shard)
    opt.load_state_dict(copy.deepcopy(checkpoint))
    assert [g["lr"] for g in opt.param_groups] == [2e-2, 5e-3]
    _assert_state_only_for_owned(opt, f"loaded at world size {world_size}")
    _train(model, opt, seed, range(SAVE_AT, SAVE_AT + MORE_STEPS))
    if world_size == 1:  # no consolidation needed; the state dict is whole
        assert sorted(opt.state_dict()["state"]) == sorted(checkpoint["state"])
    return _cloned(model.parameters()), _cloned(from_files.parameters())


def _assert_state_dicts_equal(a, b):
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for index, state in a["state"].items():
        assert state.keys() == b["state"][index].keys()
        assert all(torch.equal(v, b["state"][index][k]) for k, v in state.items())


def _at_two(rank, world_size, seed, directory):
    assert _check_matches_unsharded(rank, world_size, seed)
    return _save_at_two(rank, world_size, seed, directory)


def _at_three(rank, world_size, seed, checkpoint, snapshot, foreign_shard, directory):
    assert _check_matches_unsharded(rank, world_size, seed)
    return _resume(rank, world_size, seed, checkpoint, snapshot, foreign_shard, directory)


def test_matches_unsharded_and_checkpoints_move_across_world_sizes(tmp_path):
    """World sizes 2 and 3 against the unsharded optimizer; a checkpoint saved at 2 resumes at 3, 1 and in AdamW.

    One test because each spawned run costs seconds: the run at world size 2
    also saves the checkpoints that the run at world size 3 resumes from, both
    the state dicts and zero1.save_checkpoint's files.
    """
    seed = random.randrange(2**31)
    directory = str(tmp_path)
    saved = spawn(_at_two, 2, args=(seed, directory), timeout_s=TIMEOUT_S)
    consolidated, _, snapshot, uninterrupted = saved[0]
    shards = [shard for _, shard, _, _ in saved]

    # The two forms agree; the consolidated one holds every trained parameter's state.
    _assert_state_dicts_equal(merge_sharded_state_dicts(shards[::-1]), consolidated)
    assert sorted(consolidated["state"]) == [
        i for i, p in enumerate(p for g in _checkpoint_groups(_Net()) for p in g["params"]) if p.requires_grad
    ]

    for world_size, run in ((3, _at_three), (1, _resume)):
        args = (seed, consolidated, snapshot, shards[0], directory)
        for from_dict, from_files in spawn(run, world_size, args=args, timeout_s=TIMEOUT_S):
            _assert_same(uninterrupted, from_dict, f"resumed at world size {world_size} (seed {seed})")
            _assert_same(uninterrupted, from_files, f"load_checkpoint at world size {world_size} (seed {seed})")

    model = _net_from(snapshot)
    plain = torch.optim.AdamW(_checkpoint_groups(model), lr=1.0)
    plain.load_state_dict(copy.deepcopy(consolidated))
    _train(model, plain, seed, range(SAVE_AT, SAVE_AT + MORE_STEPS))
    _assert_same(uninterrupted, model.parameters(), f"resumed in plain AdamW (seed {seed})")

    # The files read in one process, without a process group, into the model and plain AdamW.
    model_state, optimizer_state, _ = read_checkpoint(directory)
    _assert_state_dicts_equal(optimizer_state, consolidated)
    torch.manual_seed(seed + 1)
    model = _Net()
    model.load_state_dict(model_state)
    plain = torch.optim.AdamW(_checkpoint_groups(model), lr=1.0)
    plain.load_state_dict(optimizer_state)
    _train(model, plain, seed, range(SAVE_AT, SAVE_AT + MORE_STEPS))
    _assert_same(uninterrupted, model.parameters(), f"read_checkpoint into plain AdamW (seed {seed})")


# ---------------------------------------------------------------- GPUs


def _on_gpus(rank, world_size, seed):
    """The scenarios on CUDA (AdamW's default there is foreach), then a checkpoint consolidated over NCCL."""
    device = torch.device("cuda", rank)
    _check_scenarios(seed, device)
    torch.manual_seed(seed)
    model = _Net().to(device)
    opt = ShardedOptimizer(_checkpoint_groups(model), torch.optim.AdamW, lr=1e-2)
    _train(model, opt, seed, range(SAVE_AT))
    opt.consolidate_state_dict(to=world_size - 1)
    consolidated = opt.state_dict() if rank == world_size - 1 else None
    return consolidated, _cloned_state(opt.sharded_state_dict())


def _cloned_state(shard):
    return {**shard, "state": {i: {k: v.cpu() for k, v in s.items()} for i, s in shard["state"].items()}}


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs (one per rank)")
def test_matches_unsharded_on_two_gpus_with_nccl():
    seed = random.randrange(2**31)
    results = spawn(_on_gpus, 2, args=(seed,), backend="nccl", timeout_s=TIMEOUT_S)
    consolidated = results[1][0]
    assert all(t.device.type == "cpu" for s in consolidated["state"].values() for t in s.values())
    _assert_state_dicts_equal(merge_sharded_state_dicts([shard for _, shard in results]), consolidated)
