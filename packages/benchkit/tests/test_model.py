"""The reference Transformer: parameter counts, attention backends, RoPE, causality, loss."""

import math

import pytest
import torch

from benchkit.model import (
    SIZES,
    CausalSelfAttention,
    ModelConfig,
    TransformerLM,
    lm_loss,
    model_config,
    parameter_count,
    random_batch,
)


@pytest.mark.parametrize("size", list(SIZES))
def test_parameter_count_matches_the_built_model(size):
    config = model_config(size, context_length=64)
    with torch.device("meta"):  # shapes only: the 2.7B model is never allocated
        model = TransformerLM(config)
    assert sum(p.numel() for p in model.parameters()) == parameter_count(config)


def test_parameter_count_of_small_by_hand():
    # vocab 10000, d 768, d_ff 3072, 12 layers: embedding + head 2*10000*768,
    # per layer 4*768^2 + 3*768*3072 + 2*768 = 9,438,720, final norm 768.
    assert parameter_count(model_config("small", 256)) == 2 * 10000 * 768 + 12 * 9_438_720 + 768


def _reference_attention(module: CausalSelfAttention, x: torch.Tensor, theta: float) -> torch.Tensor:
    """Float64 causal attention with RoPE written as complex rotation (independent of the model code)."""
    x = x.double()
    batch, seq_len, d_model = x.shape
    heads = module.num_heads
    head_dim = d_model // heads
    q, k, v = (x @ module.qkv.weight.double().T).split(d_model, dim=-1)
    q, k, v = (t.view(batch, seq_len, heads, head_dim).transpose(1, 2) for t in (q, k, v))
    freqs = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    rotation = torch.polar(
        torch.ones(seq_len, head_dim // 2, dtype=torch.float64),
        torch.arange(seq_len, dtype=torch.float64)[:, None] * freqs,
    )

    def rope(t):
        return torch.view_as_real(torch.view_as_complex(t.reshape(*t.shape[:-1], -1, 2)) * rotation).flatten(-2)

    q, k = rope(q), rope(k)
    out = torch.zeros_like(q)
    for i in range(seq_len):  # position i attends to positions 0..i
        weights = torch.softmax(q[:, :, i : i + 1] @ k[:, :, : i + 1].transpose(-1, -2) / math.sqrt(head_dim), dim=-1)
        out[:, :, i : i + 1] = weights @ v[:, :, : i + 1]
    return out.transpose(1, 2).reshape(batch, seq_len, d_model) @ module.out.weight.double().T


@pytest.mark.parametrize("attention", ["naive", "sdpa", "flashattn2"])
def test_attention_layer_matches_float64_reference(attention):
    config = ModelConfig(context_length=24, d_model=32, d_ff=64, num_layers=1, num_heads=2, attention=attention)
    module = CausalSelfAttention(config)
    x = torch.randn(2, 19, 32)  # shorter than the context: the RoPE tables are sliced
    expected = _reference_attention(module, x, config.rope_theta)
    torch.testing.assert_close(module(x).double(), expected, rtol=1e-4, atol=1e-5)


def test_forward_is_the_same_across_attention_backends():
    config = model_config("tiny", context_length=16, attention="naive")
    reference_model = TransformerLM(config).double()
    inputs, _ = random_batch(config, batch_size=2)
    expected = reference_model(inputs)
    assert expected.shape == (2, 16, config.vocab_size)
    for attention in ("naive", "sdpa", "flashattn2"):
        model = TransformerLM(ModelConfig(**{**config.__dict__, "attention": attention}))
        model.load_state_dict(reference_model.state_dict())
        logits = model(inputs)
        assert logits.dtype == torch.float32
        torch.testing.assert_close(logits.double(), expected, rtol=1e-4, atol=1e-4, msg=attention)


def test_the_model_is_causal():
    config = model_config("tiny", context_length=12)
    model = TransformerLM(config)
    inputs, _ = random_batch(config, batch_size=1)
    changed = inputs.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % config.vocab_size
    with torch.no_grad():
        before, after = model(inputs), model(changed)
    torch.testing.assert_close(before[:, :7], after[:, :7])
    assert not torch.allclose(before[:, 7:], after[:, 7:])


def test_lm_loss_is_mean_negative_log_likelihood():
    logits = torch.randn(2, 5, 11)
    targets = torch.randint(0, 11, (2, 5))
    log_probs = torch.log_softmax(logits.double(), dim=-1)
    expected = -log_probs.gather(-1, targets[..., None]).mean()
    torch.testing.assert_close(lm_loss(logits, targets).double(), expected, rtol=1e-6, atol=1e-6)


def test_tiny_model_learns_a_fixed_batch():
    torch.manual_seed(0)
    config = model_config("tiny", context_length=16)
    model = TransformerLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    inputs, targets = random_batch(config, batch_size=2)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = lm_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # Starts near the uniform guess ln(10000) = 9.2 and memorizes the batch.
    assert losses[-1] < 0.5 * losses[0]


def test_bad_configurations_are_rejected_with_the_argument_named():
    with pytest.raises(ValueError, match="num_heads"):
        ModelConfig(context_length=8, d_model=30, d_ff=8, num_layers=1, num_heads=4)
    with pytest.raises(ValueError, match="even"):
        ModelConfig(context_length=8, d_model=12, d_ff=8, num_layers=1, num_heads=4)
    with pytest.raises(ValueError, match="attention"):
        model_config("tiny", 8, attention="flash")
    with pytest.raises(ValueError, match="size"):
        model_config("huge", 8)
    model = TransformerLM(model_config("tiny", 8))
    with pytest.raises(ValueError, match="context_length"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TypeError, match="int64"):
        model(torch.zeros(1, 4))
