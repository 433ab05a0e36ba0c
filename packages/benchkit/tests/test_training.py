"""benchkit.training.Trainer, the one training step: micro-batches against plain full-batch training,
the wrapper's sync phase, in-place gradient reset, and the phase callback."""

import copy

import pytest
import torch
from torch import nn

from benchkit.model import TransformerLM, lm_loss, model_config, random_batch
from benchkit.timing import PhaseTimer
from benchkit.training import Trainer, timed_steps


def _tiny_float64(seed):
    torch.manual_seed(seed)
    config = model_config("tiny", context_length=8)
    return config, TransformerLM(config).double()


def test_micro_batches_train_like_the_whole_batch():
    # SGD, not AdamW: AdamW's update is nearly invariant to the gradient's scale (it would
    # hide a missing 1/micro-batches), and near a zero gradient it multiplies float64
    # rounding by up to lr / eps = 1e6, past any tight bound on the parameters. With SGD,
    # 200 seeds differed by at most 8e-17 in a gradient and 4e-16 in a parameter.
    config, model = _tiny_float64(int(torch.randint(0, 1000, ())))
    inputs, targets = random_batch(config, 4)
    reference = copy.deepcopy(model)  # trained by hand: the mean loss of the whole batch, then SGD
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=1e-2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    trainer = Trainer(model, optimizer, list(zip(inputs.chunk(2), targets.chunk(2))))
    for _ in range(3):
        loss = trainer.step()
        reference_optimizer.zero_grad()
        expected = lm_loss(reference(inputs), targets)
        expected.backward()
        reference_optimizer.step()
        assert loss == pytest.approx(expected.item(), rel=1e-6)  # the mean over the micro-batches
        for got, want in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(got.grad, want.grad, rtol=0, atol=1e-14)
    for got, want in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


class CountingWrapper(nn.Module):
    """A stand-in for a data-parallel wrapper: calls the module, counts gradient synchronizations."""

    def __init__(self, module):
        super().__init__()
        self.module = module
        self.synchronized = 0

    def forward(self, token_ids):
        return self.module(token_ids)

    def finish_gradient_synchronization(self):
        self.synchronized += 1


def test_a_wrappers_synchronization_is_the_sync_phase():
    config, model = _tiny_float64(0)
    wrapper = CountingWrapper(model)
    trainer = Trainer(model, torch.optim.AdamW(model.parameters()), [random_batch(config, 2)], wrapper=wrapper)
    ended = []
    timer = timed_steps(trainer, "train-step", warmup=1, steps=2, after_phase=ended.append)
    assert list(timer.samples) == ["forward", "backward", "sync", "optimizer"]
    assert all(len(samples) == 2 for samples in timer.samples.values())  # the warm-up step is not kept
    assert ended == ["forward", "backward", "sync", "optimizer"] * 3 and wrapper.synchronized == 3
    trainer.step("forward", PhaseTimer("cpu"))
    assert wrapper.synchronized == 3  # no backward, nothing to synchronize


def test_gradients_are_reset_in_place_when_asked():
    config, model = _tiny_float64(1)
    batch = random_batch(config, 2)
    trainer = Trainer(model, torch.optim.AdamW(model.parameters()), [batch], set_to_none=False)
    trainer.step("forward-backward")
    grads = [p.grad for p in model.parameters()]
    first = [g.clone() for g in grads]
    trainer.step("forward-backward")
    for param, grad, expected in zip(model.parameters(), grads, first, strict=True):
        assert param.grad is grad  # the same tensor, zeroed and refilled: not accumulated twice
        torch.testing.assert_close(grad, expected, rtol=0, atol=0)
    with pytest.raises(ValueError, match="precision must be one of"):
        Trainer(model, trainer.optimizer, [batch], precision="fp8")
    with pytest.raises(ValueError, match="at least one"):
        Trainer(model, trainer.optimizer, [])
