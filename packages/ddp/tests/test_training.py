"""Every wrapper trains exactly like one process on the whole batch.

Each spawned rank builds the model from its own seed (so only the constructor's
broadcast can make the ranks agree), trains on its slice of every batch, and
returns its parameters; the parent trains the same model in one process on the
whole batches and compares. All wrapper configurations run inside one spawn per
world size, because starting processes dominates the test time.

The model has every awkward feature at once: tied weights, a frozen layer and a
frozen bias, a buffer, a layer used only on samples that need it (so some ranks
or whole steps give it no gradient), float32/float64/bfloat16 parameters, and two
same-shaped layers whose gradients become ready in a different order on odd
ranks (an all-reduce order that followed readiness would average the wrong
tensors without any error).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ddp import BucketedDDP, FlatDDP, NaiveDDP, OverlapDDP
from ddp.launch import spawn

pytestmark = pytest.mark.distributed

IN, HIDDEN, OUT = 6, 8, 3
SAMPLES_PER_RANK = 2
STEPS = 4
MICRO_BATCHES = 3
LR = 0.1
INIT_SEED = 1234  # rank r builds its model from INIT_SEED + r; the reference is rank 0's

# (name, wrapper factory, compressed?). Bucket caps are in MiB: 1e-9 MiB is below
# any parameter's size (every parameter its own bucket); a bucket closed at 5e-4 MiB
# (524 bytes) holds two to four of this model's 12-256 byte tensors; None is one bucket
# per dtype. "bucketed-first" closes bucket 0 at 5e-6 MiB (5.2 bytes): low.bias (6 bytes)
# fills it alone, and low.weight (36) starts bucket 1.
CONFIGS = [
    ("naive", lambda m: NaiveDDP(m), False),
    ("flat", lambda m: FlatDDP(m), False),
    ("overlap", lambda m: OverlapDDP(m), False),
    ("bucketed-tiny", lambda m: BucketedDDP(m, bucket_size_mb=1e-9), False),
    ("bucketed-medium", lambda m: BucketedDDP(m, bucket_size_mb=5e-4), False),
    ("bucketed-one", lambda m: BucketedDDP(m, bucket_size_mb=None), False),
    ("bucketed-first", lambda m: BucketedDDP(m, bucket_size_mb=5e-4, first_bucket_mb=5e-6), False),
    ("naive-bf16", lambda m: NaiveDDP(m, compress_bf16=True), True),
    ("flat-bf16", lambda m: FlatDDP(m, compress_bf16=True), True),
    ("overlap-bf16", lambda m: OverlapDDP(m, compress_bf16=True), True),
    ("bucketed-bf16", lambda m: BucketedDDP(m, bucket_size_mb=5e-4, compress_bf16=True), True),
]


class AwkwardNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(IN, HIDDEN)
        self.b = nn.Linear(IN, HIDDEN)
        self.tied_1 = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.tied_2 = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.tied_2.weight = self.tied_1.weight
        self.frozen = nn.Linear(HIDDEN, HIDDEN).requires_grad_(False)
        self.frozen_bias = nn.Linear(HIDDEN, HIDDEN)
        self.frozen_bias.bias.requires_grad_(False)
        self.sometimes = nn.Linear(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, OUT)
        self.wide = nn.Linear(IN, OUT, dtype=torch.float64)
        self.low = nn.Linear(IN, OUT, dtype=torch.bfloat16)
        self.register_buffer("shift", torch.randn(HIDDEN))

    def forward(self, x: torch.Tensor, swap: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (B, IN) float32 -> (main output (B, OUT) float32, bf16 branch (B, OUT) bfloat16)."""
        if swap:  # same math, other autograd order: b's gradients become ready before a's
            hb = self.b(x)
            ha = self.a(x)
        else:
            ha = self.a(x)
            hb = self.b(x)
        h = torch.tanh(ha) * torch.sigmoid(hb) + self.shift
        h = torch.tanh(self.tied_2(torch.tanh(self.tied_1(h))))
        h = self.frozen(h) + self.frozen_bias(h)
        wanted = x[:, 0] > 1.0
        if wanted.any():  # skipped entirely otherwise: then self.sometimes gets no gradient
            h = h + torch.where(wanted[:, None], torch.tanh(self.sometimes(h)), 0.0)
        main = self.head(h) + self.wide(x.double()).float()
        return main, self.low(x.bfloat16())


def loss_fn(outputs: tuple[torch.Tensor, torch.Tensor], target: torch.Tensor) -> torch.Tensor:
    """Mean over the batch; the bf16 branch is a separate term so its rounding cannot reach float32 gradients."""
    main, low = outputs
    return (main - target).square().mean() + low.float().square().mean()


def make_batches(seed: int, world_size: int, micro_batches: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """STEPS batches of world_size * micro_batches * SAMPLES_PER_RANK samples.

    Feature 0 decides who uses ``AwkwardNet.sometimes`` (> 1). Step 0: only the
    first sample (rank 0's first micro-batch); step 1: only the last sample (the
    last rank's last micro-batch); step 2: nobody, right after zero_grad(set_to_none=True)
    (a stale gradient from step 1 must not leak in); step 3: random.
    """
    gen = torch.Generator().manual_seed(seed)
    size = world_size * micro_batches * SAMPLES_PER_RANK
    batches = []
    for step in range(STEPS):
        x = torch.randn(size, IN, generator=gen)
        chosen = {0: [0], 1: [size - 1], 2: []}
        if step in chosen:
            x[:, 0] = -1.0
            x[chosen[step], 0] = 2.0
        batches.append((x, torch.randn(size, OUT, generator=gen)))
    return batches


def sgd_step(model: nn.Module) -> None:
    """Plain SGD, written out: constructing a torch.optim optimizer imports torch._dynamo,
    which costs seconds in every spawned process."""
    with torch.no_grad():
        for param in model.parameters():
            if param.grad is not None:
                param -= LR * param.grad


def train(batches, rank: int = 0, world_size: int = 1, micro_batches: int = 1, make_wrapper=None, device="cpu"):
    """Train AwkwardNet on ``device`` with SGD; returns (model, wrapper or None). Alternates
    zero_grad(set_to_none=...)."""
    torch.manual_seed(INIT_SEED + rank)
    model = AwkwardNet().to(device)
    wrapper = make_wrapper(model) if make_wrapper else None
    trained = wrapper if wrapper is not None else model
    for step, (x, y) in enumerate(batches):
        trained.zero_grad(set_to_none=step % 2 == 0)
        x_mine, y_mine = x.chunk(world_size)[rank].to(device), y.chunk(world_size)[rank].to(device)
        pieces = list(zip(x_mine.chunk(micro_batches), y_mine.chunk(micro_batches)))
        for index, (xm, ym) in enumerate(pieces):
            loss = loss_fn(trained(xm, swap=rank % 2 == 1), ym) / micro_batches
            if wrapper is not None and index < len(pieces) - 1:
                with wrapper.no_sync():
                    loss.backward()
            else:
                loss.backward()
        if wrapper is not None:
            wrapper.finish_gradient_synchronization()
        sgd_step(model)
    return model, wrapper


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """The parameters, copied to the CPU."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters()}


def _compressed_sum_check(rank, world_size, make_wrapper, x, y):
    """After one step, .grad must be the bf16 sum of the ranks' bf16 gradients, divided in float32."""
    torch.manual_seed(INIT_SEED + rank)
    model = AwkwardNet()
    wrapper = make_wrapper(model)
    xm, ym = x.chunk(world_size)[rank], y.chunk(world_size)[rank]
    with wrapper.no_sync():  # local gradients, not communicated
        loss_fn(wrapper(xm), ym).backward()
    local = {
        n: p.grad.clone() if p.grad is not None else torch.zeros_like(p)
        for n, p in model.named_parameters()
        if p.requires_grad
    }
    wrapper.zero_grad(set_to_none=True)
    loss_fn(wrapper(xm), ym).backward()
    wrapper.finish_gradient_synchronization()
    errors = {}
    for name, param in model.named_parameters():
        if name not in local:
            continue
        gathered = [torch.empty_like(local[name]) for _ in range(world_size)]
        torch.distributed.all_gather(gathered, local[name])
        expected = (gathered[0].bfloat16() + gathered[1].bfloat16()).float() / world_size
        if param.dtype == torch.float32:  # bf16 gradients are not compressed; float64 ones are checked by training
            errors[name] = (param.grad - expected).abs().max().item()
    return errors


def _ranks_train(rank, world_size, data_seed):
    """Runs every configuration on this rank; returns what the parent checks."""
    out = {"trained": {}, "accumulated": {}, "contract": {}, "compressed_sum": {}}
    batches = make_batches(data_seed, world_size, 1)
    micro = make_batches(data_seed + 1, world_size, MICRO_BATCHES)
    for name, make_wrapper, _ in CONFIGS:
        model, wrapper = train(batches, rank, world_size, 1, make_wrapper)
        out["trained"][name] = snapshot(model)
        out["contract"][name] = {
            "module_is_model": wrapper.module is model,
            "same_parameters": [id(p) for p in wrapper.parameters()] == [id(p) for p in model.parameters()],
            "same_names": [n for n, _ in wrapper.named_parameters()] == [n for n, _ in model.named_parameters()],
            "grads_equal_dtype": all(p.grad.dtype == p.dtype for p in model.parameters() if p.requires_grad),
            "frozen_grads_none": all(p.grad is None for p in model.parameters() if not p.requires_grad),
            "forward_passes_through": all(
                torch.equal(u, v) for u, v in zip(wrapper(batches[0][0]), model(batches[0][0]))
            ),
            "shift": model.shift.clone(),
            "buckets": wrapper.bucket_members if isinstance(wrapper, BucketedDDP) else None,
            # BucketedDDP: the gradients of one bucket live in one buffer (views, no copies)
            "storages_per_bucket": [
                len({dict(model.named_parameters())[n].grad.untyped_storage().data_ptr() for n in bucket})
                for bucket in wrapper.bucket_members
            ]
            if isinstance(wrapper, BucketedDDP)
            else None,
        }
        model, _ = train(micro, rank, world_size, MICRO_BATCHES, make_wrapper)
        out["accumulated"][name] = snapshot(model)
        if world_size == 2 and name.endswith("bf16"):
            x, y = batches[-1]
            out["compressed_sum"][name] = _compressed_sum_check(rank, world_size, make_wrapper, x, y)
    return out


def _assert_close_to(reference: dict[str, torch.Tensor], got: dict[str, torch.Tensor], compressed: bool, label: str):
    assert list(got) == list(reference), label
    for name, expected in reference.items():
        if expected.dtype == torch.bfloat16:
            tol = dict(rtol=2e-2, atol=2e-2)  # bf16 keeps 8 significant bits
        elif compressed:
            tol = dict(rtol=1e-2, atol=1e-3)  # gradients summed in bf16
        else:
            tol = dict(rtol=1e-5, atol=1e-6)  # float32 summation-order differences only
        torch.testing.assert_close(got[name], expected, **tol, msg=lambda m: f"{label} {name}: {m}")


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_wrappers_match_single_process_training(world_size):
    data_seed = int(torch.randint(0, 2**30, ()).item())
    results = spawn(_ranks_train, world_size, args=(data_seed,), timeout_s=120)

    reference, _ = train(make_batches(data_seed, world_size, 1), world_size=1)
    reference_micro, _ = train(make_batches(data_seed + 1, world_size, MICRO_BATCHES), world_size=1)
    reference = snapshot(reference)
    reference_micro = snapshot(reference_micro)
    # The test only means something if the ranks really started different.
    torch.manual_seed(INIT_SEED + 1)
    assert not torch.equal(AwkwardNet().a.weight, reference["a.weight"])

    for name, _, compressed in CONFIGS:
        for rank, result in enumerate(results):
            _assert_close_to(reference, result["trained"][name], compressed, f"{name} rank {rank}")
            _assert_close_to(reference_micro, result["accumulated"][name], compressed, f"{name} no_sync rank {rank}")
            contract = result["contract"][name]
            for key in (
                "module_is_model",
                "same_parameters",
                "same_names",
                "grads_equal_dtype",
                "frozen_grads_none",
                "forward_passes_through",
            ):
                assert contract[key], f"{name} rank {rank}: {key}"
            # rank 0's buffer was broadcast
            torch.testing.assert_close(contract["shift"], results[0]["contract"][name]["shift"], rtol=0, atol=0)
            # all ranks hold bit-identical parameters: the same averaged gradients everywhere
            for param_name, value in result["trained"][name].items():
                assert torch.equal(value, results[0]["trained"][name][param_name]), (name, rank, param_name)

    # Frozen parameters never move: they equal rank 0's initial values.
    torch.manual_seed(INIT_SEED)
    initial = snapshot(AwkwardNet())
    for frozen in ("frozen.weight", "frozen.bias", "frozen_bias.bias"):
        assert torch.equal(results[-1]["trained"]["bucketed-tiny"][frozen], initial[frozen])

    buckets = {name: results[0]["contract"][name]["buckets"] for name, _, _ in CONFIGS}
    trainable = [n for n, p in AwkwardNet().named_parameters() if p.requires_grad]
    assert buckets["bucketed-tiny"] == [[n] for n in reversed(trainable)]
    # one bucket per run of equal dtype, in reverse registration order: bf16, fp64, then fp32
    assert buckets["bucketed-one"] == [
        ["low.bias", "low.weight"],
        ["wide.bias", "wide.weight"],
        [n for n in reversed(trainable) if not n.startswith(("low", "wide"))],
    ]
    assert 3 < len(buckets["bucketed-medium"]) < len(trainable)
    assert buckets["bucketed-first"][:2] == [["low.bias"], ["low.weight"]]
    assert buckets["bucketed-first"][2:] == buckets["bucketed-medium"][1:]
    for name in ("bucketed-tiny", "bucketed-medium", "bucketed-one", "bucketed-first"):
        assert results[0]["contract"][name]["storages_per_bucket"] == [1] * len(buckets[name])

    if world_size == 2:
        for name, errors in results[0]["compressed_sum"].items():
            assert errors and max(errors.values()) <= 1e-7, (name, errors)


# ---------------------------------------------------------------- GPUs


def _ranks_train_on_gpus(rank, world_size, data_seed):
    """Every configuration on this rank's GPU (NCCL averages with ReduceOp.AVG inside the all-reduce)."""
    device = torch.device("cuda", rank)
    batches = make_batches(data_seed, world_size, 1)
    micro = make_batches(data_seed + 1, world_size, MICRO_BATCHES)
    out = {"trained": {}, "accumulated": {}}
    for name, make_wrapper, _ in CONFIGS:
        model, _ = train(batches, rank, world_size, 1, make_wrapper, device=device)
        out["trained"][name] = snapshot(model)
        model, _ = train(micro, rank, world_size, MICRO_BATCHES, make_wrapper, device=device)
        out["accumulated"][name] = snapshot(model)
    return out


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs (one per rank)")
def test_wrappers_match_single_process_training_on_two_gpus_with_nccl():
    data_seed = int(torch.randint(0, 2**30, ()).item())
    results = spawn(_ranks_train_on_gpus, 2, args=(data_seed,), backend="nccl", timeout_s=180)
    device = torch.device("cuda", 0)
    reference, _ = train(make_batches(data_seed, 2, 1), device=device)
    reference_micro, _ = train(make_batches(data_seed + 1, 2, MICRO_BATCHES), device=device)
    reference = snapshot(reference)
    reference_micro = snapshot(reference_micro)
    for name, _, compressed in CONFIGS:
        for rank, result in enumerate(results):
            _assert_close_to(reference, result["trained"][name], compressed, f"{name} rank {rank}")
            _assert_close_to(reference_micro, result["accumulated"][name], compressed, f"{name} no_sync rank {rank}")
            for param_name, value in result["trained"][name].items():  # bit-identical on every rank
                assert torch.equal(value, results[0]["trained"][name][param_name]), (name, rank, param_name)
