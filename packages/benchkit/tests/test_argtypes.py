"""benchkit.argtypes: option converters accept what they promise and say what they expect."""

import argparse
from pathlib import Path

import pytest

from benchkit.argtypes import finite_float, non_negative_int, output_folder, positive_float, positive_int


def test_converters_accept_and_reject():
    assert positive_int("3") == 3 and non_negative_int("0") == 0 and positive_float("2.5e9") == 2.5e9
    for convert, text, message in (
        (positive_int, "0", "integer >= 1"),
        (non_negative_int, "-1", "integer >= 0"),
        (positive_float, "0", "positive finite"),
        (positive_float, "inf", "positive finite"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            convert(text)


def test_finite_float_takes_any_finite_number_only():
    assert finite_float("-2.5") == -2.5 and finite_float("0") == 0.0
    for text in ("nan", "inf", "-inf", "1e400"):  # 1e400 is infinity as a float
        with pytest.raises(argparse.ArgumentTypeError, match=f"must be a finite number, got {text}"):
            finite_float(text)


def test_output_folder_accepts_creatable_folders_without_creating_them(tmp_path):
    (tmp_path / "existing").mkdir()
    assert output_folder(str(tmp_path / "existing")) == tmp_path / "existing"
    assert output_folder(str(tmp_path / "new" / "deeper")) == tmp_path / "new" / "deeper"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing"]  # the probe leaves nothing behind
    assert list((tmp_path / "existing").iterdir()) == []


def test_output_folder_rejects_files_and_uncreatable_paths(tmp_path):
    file = tmp_path / "results.json"
    file.write_text("{}")
    with pytest.raises(argparse.ArgumentTypeError, match=r"results\.json exists and is not a folder"):
        output_folder(str(file))
    with pytest.raises(argparse.ArgumentTypeError, match=f"sub cannot be created: {file} is not a folder"):
        output_folder(str(file / "sub"))


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no folder can be made")
def test_output_folder_tries_to_create_a_folder():
    with pytest.raises(argparse.ArgumentTypeError, match=r"/proc/nope: cannot create a folder in /proc \("):
        output_folder("/proc/nope")
