"""benchkit accounting: the numbers match ones worked out by hand, and the command writes its files."""

import dataclasses
import json
import math

import pytest

from benchkit.accounting import (
    DEVICES,
    FORMULAS,
    AccountingSettings,
    Parallelism,
    account,
    check_parallelism,
    compute_bound_tokens,
    named_model,
    run_accounting,
    step_times,
)
from benchkit.cli import main
from benchkit.errors import BenchkitError

# Hand-worked quantities (each line's arithmetic written out).
XXL_PARAMS = 2 * 16384 * 53248 * 126  # two d x f matrices per block = 219,848,638,464
SMALL_PARAMS = 10000 * 768 * 2 + 12 * (4 * 768 * 768 + 3 * 768 * 3072 + 2 * 768) + 768  # = 128,625,408


def test_xxl_ffn_on_tpu_v5p_with_fsdp_and_tensor_parallelism():
    assert XXL_PARAMS == 219_848_638_464
    model = named_model("xxl-ffn", seq_len=2048)
    row = account(model, DEVICES["tpu-v5p"], Parallelism(fsdp=16, tp=4), batch_size=256, seq_len=2048)
    assert row["parameters"] == XXL_PARAMS
    # Model state: 4 bytes per parameter for the fp32 master copy, sharded over tp*fsdp = 64 devices.
    assert row["master_fp32_gb"] == pytest.approx(4 * 219_848_638_464 / 64 / 1e9)  # 13.74 GB
    assert row["compute_bf16_gb"] == pytest.approx(2 * 219_848_638_464 / 64 / 1e9)
    # Activations: 256*2048 = 524,288 tokens over 16 fsdp ranks = 32,768 tokens; 126 blocks of
    # (d + f/tp) = 16384 + 13312 = 29696 bf16 elements per token.
    assert row["activations_gb"] == pytest.approx(2 * 32_768 * 126 * 29_696 / 1e9)  # 245.2 GB
    assert row["total_gb"] == pytest.approx(18 * 219_848_638_464 / 64 / 1e9 + 2 * 32_768 * 126 * 29_696 / 1e9)
    assert row["fits"] is False
    # 18 bytes * P = 3957.3 GB of model state; 95 GB per chip -> 41.66 -> 42 chips.
    assert row["devices_for_state"] == 42
    # Compute: 3 * 4*d*f*L FLOPs per token * 524,288 tokens / (64 chips * 459e12 FLOP/s).
    compute = 3 * 4 * 16384 * 53248 * 126 * 524_288 / (64 * 459e12)
    assert row["compute_ms"] == pytest.approx(compute * 1e3)
    # Communication: FSDP 3 * 15/16 * (2 bytes * P / 4) plus TP 2 * 2 * 3/4 * (2 * 16384 * 32768) * 126,
    # over 600 GB/s.
    fsdp_bytes = 3 * 15 / 16 * 2 * 219_848_638_464 / 4
    tp_bytes = 2 * 2 * 3 / 4 * 2 * 16384 * 32_768 * 126
    assert row["comm_ms"] == pytest.approx((fsdp_bytes + tp_bytes) / 600e9 * 1e3)
    assert row["bound_by"] == "compute"
    # Compute-bound batch: compute a*G = c0 + c1*G with a, c0, c1 from the lines above.
    a = 3 * 4 * 16384 * 53248 * 126 / (64 * 459e12)
    c0 = fsdp_bytes / 600e9
    c1 = 2 * 2 * 3 / 4 * 2 * 16384 / 16 * 126 / 600e9
    assert row["compute_bound_tokens"] == pytest.approx(c0 / (a - c1))
    assert row["compute_bound_batch"] == math.ceil(c0 / (a - c1) / 2048)


def test_small_transformer_on_h100_with_data_parallelism():
    model = named_model("small", seq_len=1024)
    assert model.parameters == SMALL_PARAMS == 128_625_408
    row = account(model, DEVICES["h100"], Parallelism(dp=8), batch_size=32, seq_len=1024)
    # Plain data parallelism replicates all 18 bytes per parameter.
    assert row["total_gb"] - row["activations_gb"] == pytest.approx(18 * 128_625_408 / 1e9)
    # 32*1024 tokens over 8 ranks = 4096 tokens; 12 layers of (8*768 + 3*3072) = 15360 elements.
    assert row["activations_gb"] == pytest.approx(2 * 4096 * 12 * 15_360 / 1e9)
    assert row["devices_for_state"] == 1
    # Forward FLOPs per token: 2 * (P - embedding) + 4 * L * d * T (PaLM appendix B).
    forward = 2 * (128_625_408 - 10000 * 768) + 4 * 12 * 768 * 1024
    assert row["compute_ms"] == pytest.approx(3 * forward * 32 * 1024 / (8 * 989e12) * 1e3)
    # Gradient all-reduce: 2 * 7/8 * 2 bytes * P over 450 GB/s (NVLink, one direction).
    allreduce = 2 * 7 / 8 * 2 * 128_625_408 / 450e9
    assert row["comm_ms"] == pytest.approx(allreduce * 1e3)
    # No activation traffic, so the step is compute-bound once a*G >= c0.
    assert row["compute_bound_tokens"] == pytest.approx(allreduce / (3 * forward / (8 * 989e12)))


def test_pipeline_traffic_and_never_compute_bound():
    model = named_model("tiny", seq_len=64)
    device = DEVICES["h100"]
    _, comm = step_times(model, device, Parallelism(pp=2), 640.0)
    assert comm == pytest.approx(2 * 2 * 64 * 640 / 450e9)  # activations forward + their gradients backward
    assert step_times(model, device, Parallelism(), 640.0)[1] == 0.0
    assert compute_bound_tokens(model, device, Parallelism()) == 0.0
    # tp 8 on the tiny model: activation traffic per token outgrows its compute per token.
    assert compute_bound_tokens(model, device, Parallelism(tp=8)) is None


def test_bad_degrees_are_rejected():
    with pytest.raises(ValueError, match=r"Parallelism\.tp must be a positive int, got 0"):
        Parallelism(tp=0)
    with pytest.raises(ValueError, match="model must be one of"):
        named_model("huge", 128)


def test_degrees_that_split_the_model_and_batch_evenly_are_accepted():
    # tiny: 4 heads, d_ff 256, 2 layers; xxl-ffn: no heads, d_ff 53248 = 2**12 * 13, 126 blocks.
    check_parallelism(named_model("tiny", 64), Parallelism(dp=2, fsdp=2, tp=4, pp=2), batch_size=4)
    check_parallelism(named_model("xxl-ffn", 64), Parallelism(tp=13, pp=126), batch_size=1)


@pytest.mark.parametrize(
    "options, message",
    [
        (["--tp", "1000000"], "--tp 1000000 must divide xxl-ffn's feed-forward width d_ff = 53248"),
        (["--model", "tiny", "--tp", "3", "--fsdp", "1"], "--tp 3 must divide tiny's 4 attention heads"),
        (["--model", "tiny", "--tp", "8", "--fsdp", "1"], "--tp 8 must divide tiny's 4 attention heads"),
        (["--pp", "200"], "--pp 200 must be at most xxl-ffn's 126 layers"),
        (
            ["--batch-size", "1", "--fsdp", "4096", "--tp", "1"],
            "--dp 1 x --fsdp 4096 = 4096 data-parallel ranks must be at most --batch-size 1",
        ),
        (
            ["--dp", "3", "--fsdp", "2", "--batch-size", "5"],
            "--dp 3 x --fsdp 2 = 6 data-parallel ranks must be at most",
        ),
    ],
)
def test_impossible_degrees_are_one_line_errors(options, message, tmp_path, capsys):
    out = tmp_path / "acc"
    assert main(["accounting", *options, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"benchkit accounting: error: {message}")
    assert len(captured.err.splitlines()) == 1 and not out.exists()


def test_command_writes_table_json_and_plot(tmp_path, capsys):
    out = tmp_path / "acc"
    assert main(["accounting", "--model", "xxl-ffn", "--out", str(out), "--csv"]) == 0
    printed = capsys.readouterr().out
    assert "H100 SXM" in printed and "TPU v5p" in printed
    document = json.loads((out / "accounting.json").read_text())
    assert {"environment", "meta", "rows"} <= set(document)
    assert [row["device"] for row in document["rows"]] == ["H100 SXM", "TPU v5p"]
    assert document["rows"][1]["devices_for_state"] == 42
    assert (out / "accounting.csv").exists()
    assert (out / "accounting.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit):
        main(["accounting", "--tp", "0"])


def test_run_accounting_accounts_each_preset_with_its_overrides():
    result = run_accounting(
        AccountingSettings(
            model="small", hardware=("h100",), dp=8, fsdp=1, tp=1, batch_size=32, seq_len=1024, link_bandwidth=1e11
        )
    )
    slower_links = dataclasses.replace(DEVICES["h100"], link_bandwidth=1e11)
    assert result.rows == [
        account(named_model("small", 1024), slower_links, Parallelism(dp=8), batch_size=32, seq_len=1024)
    ]
    assert result.devices[0].source.endswith("overridden: ['link_bandwidth']")
    meta = result.meta()
    assert meta["formulas"] == FORMULAS and meta["parallelism"] == {"dp": 8, "fsdp": 1, "tp": 1, "pp": 1}
    assert meta["model"]["parameters"] == SMALL_PARAMS
    # One line of compute and one of communication time against the batch, on log axes.
    axes = result.figure().axes[0]
    assert [line.get_label() for line in axes.get_lines()] == ["H100 SXM compute", "H100 SXM comm"]
    assert axes.get_xscale() == axes.get_yscale() == "log"


def test_the_default_settings_are_the_commands_example():
    rows = run_accounting(AccountingSettings()).rows
    assert rows == [
        account(named_model("xxl-ffn", 2048), DEVICES[key], Parallelism(fsdp=16, tp=4), batch_size=256, seq_len=2048)
        for key in ("h100", "tpu-v5p")
    ]
    with pytest.raises(BenchkitError, match="--tp 3 must divide tiny's 4 attention heads"):
        run_accounting(AccountingSettings(model="tiny", tp=3, fsdp=1))
