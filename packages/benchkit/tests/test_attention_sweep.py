"""benchkit attention: every implementation computes attention, and the sweep records what it measured."""

import json
import math

import pytest
import torch

from benchkit import attention
from benchkit.attention import IMPLEMENTATIONS, AttentionSweep, attention_function, run_sweep
from benchkit.cli import main

# torch.compile's "aot_eager" backend traces forward and backward like inductor but
# generates no code, so the compiled path is exercised in seconds on a CPU.
FAST_COMPILE = "aot_eager"


def causal_attention_float64(q, k, v):
    """Independent reference: causal softmax(q k^T / sqrt(D)) v in float64, explicit loops over rows."""
    q, k, v = (t.detach().double() for t in (q, k, v))
    out = torch.empty_like(q)
    for i in range(q.shape[-2]):
        scores = (q[..., i : i + 1, :] @ k[..., : i + 1, :].transpose(-2, -1)) / math.sqrt(q.shape[-1])
        out[..., i : i + 1, :] = torch.softmax(scores, dim=-1) @ v[..., : i + 1, :]
    return out


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_each_implementation_matches_float64_reference(implementation):
    batch, heads, seq_len, head_dim = 2, 2, int(torch.randint(5, 24, ())), 16
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, requires_grad=True) for _ in range(3))
    fn = attention_function(implementation, compile_backend=FAST_COMPILE)
    out = fn(q, k, v)
    torch.testing.assert_close(out.double(), causal_attention_float64(q, k, v), atol=1e-5, rtol=1e-4)
    # Gradients against autograd through the float64 reference formula.
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    mask = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1)
    scores = (q64 @ k64.transpose(-2, -1) / math.sqrt(head_dim)).masked_fill(mask, float("-inf"))
    (torch.softmax(scores, -1) @ v64).backward(grad_out.double())
    for got, want in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-3)


def test_sweep_rows_hold_measurements_and_accounting():
    rows = run_sweep(
        AttentionSweep(
            seq_lens=(8, 16), head_dims=(16,), dtypes=("fp32",), heads=2, reps=1, compile_backend=FAST_COMPILE
        )
    )
    assert [(r["implementation"], r["seq_len"]) for r in rows] == [
        (impl, n) for impl in IMPLEMENTATIONS for n in (8, 16)
    ]
    for row in rows:
        assert row["status"] == "ok"
        for column in ("forward_ms", "backward_ms", "forward_backward_ms"):
            assert isinstance(row[column], float) and row[column] > 0
        assert row["peak_memory_mib"] is None  # measured on CUDA only
        assert row["scores_mib"] == 1 * 2 * row["seq_len"] ** 2 * 4 / 2**20  # B*H*N^2 float32 scores


def test_out_of_memory_cell_is_recorded_and_sweep_goes_on(monkeypatch):
    measure = attention._measure_passes

    def oom_in_backward(row, implementation, **kwargs):
        if implementation == "naive":
            row["forward_ms"] = 1.0
            raise torch.OutOfMemoryError("CUDA out of memory (planted by the test)")
        measure(row, implementation, **kwargs)

    monkeypatch.setattr(attention, "_measure_passes", oom_in_backward)
    rows = run_sweep(
        AttentionSweep(
            seq_lens=(8,), head_dims=(16,), dtypes=("fp32",), implementations=("naive", "sdpa"), heads=1, reps=1
        )
    )
    naive, sdpa = rows
    assert naive["status"] == "OOM"
    assert (naive["forward_ms"], naive["backward_ms"], naive["forward_backward_ms"]) == (1.0, "OOM", "OOM")
    assert sdpa["status"] == "ok" and isinstance(sdpa["forward_backward_ms"], float)


def test_command_writes_json_and_plot_and_reports_failures(tmp_path, monkeypatch, capsys):
    out = tmp_path / "att"
    argv = [
        "attention",
        "--device",
        "cpu",
        "--seq-len",
        "8",
        "16",
        "--head-dim",
        "16",
        "--heads",
        "1",
        "--reps",
        "1",
        "--impl",
        "naive",
        "sdpa",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    document = json.loads((out / "attention.json").read_text())
    assert document["meta"]["causal"] is True and len(document["rows"]) == 4
    assert json.loads((out / "attention.partial.json").read_text())["rows"] == document["rows"]
    assert (out / "attention_fp32_d16.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "naive" in capsys.readouterr().out

    def broken(implementation, **kwargs):
        raise RuntimeError("planted failure")

    monkeypatch.setattr(attention, "attention_function", broken)
    assert main(argv) == 1
    rows = json.loads((out / "attention.json").read_text())["rows"]
    assert all(r["status"] == "error: RuntimeError: planted failure" for r in rows)
    with pytest.raises(ValueError, match="seq_lens must be a non-empty sequence of positive ints"):
        AttentionSweep(seq_lens=(0,), head_dims=(16,), dtypes=("fp32",))


def test_every_row_names_the_backend_that_ran(tmp_path, monkeypatch, capsys):
    import flashattn2.api

    # A CPU without Triton's interpreter: flashattn2 resolves its default backend to the tiled PyTorch one.
    resolved = []

    def without_interpreter(backend, device):
        resolved.append(backend)
        return "pytorch"

    monkeypatch.setattr(flashattn2.api, "resolve_backend", without_interpreter)
    out = tmp_path / "att"
    assert (
        main(
            [
                "attention",
                "--device",
                "cpu",
                "--seq-len",
                "8",
                "--head-dim",
                "16",
                "--heads",
                "1",
                "--reps",
                "1",
                "--impl",
                "naive",
                "sdpa",
                "flashattn2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = json.loads((out / "attention.json").read_text())["rows"]
    assert {r["implementation"]: r["backend"] for r in rows} == {
        "naive": "pytorch",
        "sdpa": "pytorch",
        "flashattn2": "pytorch-tiled",
    }
    assert len(resolved) > 1  # the row's label, and the measured calls themselves
    printed = capsys.readouterr().out
    assert "flashattn2 ran as pytorch-tiled: flashattn2's tiled PyTorch implementation" in printed
    assert "the Triton kernels did not run" in printed


def test_command_saves_finished_cells_before_the_sweep_ends(tmp_path, monkeypatch):
    # The third cell is interrupted (as by a time limit or Ctrl-C): the two finished ones are on disk.
    out = tmp_path / "att"
    measure = attention.measure_cell
    calls = []

    def interrupted_at_third(implementation, **kwargs):
        calls.append(implementation)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return measure(implementation, **kwargs)

    monkeypatch.setattr(attention, "measure_cell", interrupted_at_third)
    argv = [
        "attention",
        "--device",
        "cpu",
        "--seq-len",
        "8",
        "16",
        "--head-dim",
        "16",
        "--heads",
        "1",
        "--reps",
        "1",
        "--impl",
        "naive",
        "sdpa",
        "--out",
        str(out),
    ]
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    assert not (out / "attention.json").exists()
    document = json.loads((out / "attention.partial.json").read_text())
    assert [(r["implementation"], r["seq_len"], r["status"]) for r in document["rows"]] == [
        ("naive", 8, "ok"),
        ("naive", 16, "ok"),
    ]


@pytest.mark.gpu
def test_gpu_peak_memory_follows_the_n_squared_accounting_and_real_oom_is_recorded():
    rows = run_sweep(
        AttentionSweep(
            seq_lens=(4096,), head_dims=(64,), dtypes=("bf16",), implementations=("naive", "flashattn2"), heads=4
        ),
        device="cuda",
    )
    naive, flash = rows
    assert naive["status"] == flash["status"] == "ok"
    # Naive keeps the (N, N) softmax output of every head for backward; FlashAttention-2 keeps O(N*D).
    assert naive["peak_memory_mib"] >= naive["scores_mib"]
    assert flash["peak_memory_mib"] < flash["scores_mib"] / 4
    # 16 heads of 131072^2 bf16 scores are 512 GiB: no GPU holds that.
    (oom,) = run_sweep(
        AttentionSweep(seq_lens=(131072,), head_dims=(16,), dtypes=("bf16",), implementations=("naive",), heads=16),
        device="cuda",
    )
    assert oom["status"] == "OOM" and oom["forward_ms"] == "OOM"
