"""Each package builds a wheel with exactly its declared dependency edges, and
flashattn2 installs and works alone in a fresh virtual environment."""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]

# The dependency graph of the monorepo: package -> extra -> requirement names. The extra
# "" holds the dependencies that every install gets.
EXPECTED_REQUIREMENTS = {
    "flashattn2": {"": {"torch", "triton"}, "interpreter": {"numpy"}},
    "ddp": {"": {"torch"}},
    "zero1": {"": {"torch"}},
    "benchkit": {"": {"trainsys-flashattn2", "trainsys-ddp", "trainsys-zero1", "torch", "numpy", "matplotlib"}},
}

# The CPU build of torch that lies on the CI machines' disk; an unpinned "torch" would make
# pip download a multi-GB CUDA build.
CPU_TORCH = "torch==2.13.0"


def _build_wheel(package: str, out_dir: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out_dir),
            str(ROOT / "packages" / package),
        ],
        check=True,
    )
    (wheel,) = out_dir.glob(f"trainsys_{package}-*.whl")
    return wheel


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(zf.read(name).decode())


def _requirements_by_extra(meta: email.message.Message) -> dict[str, set[str]]:
    """Requirement names by extra ("" for the unconditional ones), from Requires-Dist.

    Fails on a requirement of an extra that Provides-Extra does not declare, and on any
    environment marker other than ``extra == "..."``: none may sneak in other packages.
    """
    by_extra: dict[str, set[str]] = {extra: set() for extra in ["", *(meta.get_all("Provides-Extra") or [])]}
    for line in meta.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        extra = ""
        if requirement.marker is not None:
            match = re.fullmatch(r'extra == "([a-z0-9-]+)"', str(requirement.marker))
            assert match, f"a marker other than an extra: {line}"
            extra = match.group(1)
        by_extra[extra].add(canonicalize_name(requirement.name))
    return by_extra


@pytest.mark.parametrize("package", sorted(EXPECTED_REQUIREMENTS))
def test_wheel_metadata_has_exactly_the_declared_edges(package, tmp_path):
    meta = _metadata(_build_wheel(package, tmp_path))
    assert meta["Name"] == f"trainsys-{package}"
    assert _requirements_by_extra(meta) == EXPECTED_REQUIREMENTS[package]
    sibling_pins = [r for r in meta.get_all("Requires-Dist") or [] if r.startswith("trainsys-")]
    assert all("~=" in r for r in sibling_pins), sibling_pins


def test_flashattn2_installs_and_runs_alone(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    subprocess.run(
        # --no-compile: byte-compiling torch's 2,300 modules takes longer than the install itself.
        [python, "-m", "pip", "install", "-q", "--no-compile", str(ROOT / "packages" / "flashattn2"), CPU_TORCH],
        check=True,
        env=clean_env,
    )
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"],
        check=True,
        capture_output=True,
        text=True,
        env=clean_env,
    ).stdout
    installed = {line.split("==")[0].lower() for line in listed.split()}
    assert {"trainsys-flashattn2", "torch", "triton"} <= installed
    assert not installed & {"trainsys-ddp", "trainsys-zero1", "trainsys-benchkit", "numpy"}

    # Outside the repository, so the import can only come from the installed wheel.
    script = (
        "import torch, flashattn2\n"
        "assert 'site-packages' in flashattn2.__file__, flashattn2.__file__\n"
        "q, k, v = (torch.randn(2, 3, 17, 16) for _ in range(3))\n"
        "out = flashattn2.flash_attention(q, k, v, causal=True)\n"
        "q, k, v = q.double(), k.double(), v.double()\n"
        "mask = torch.ones(17, 17, dtype=torch.bool).tril()\n"
        "ref = torch.softmax((q @ k.transpose(-1, -2) / 4.0).masked_fill(~mask, float('-inf')), -1) @ v\n"
        "torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1e-5)\n"
        "print('ok', flashattn2.__version__)\n"
    )
    result = subprocess.run(
        [python, "-c", script], check=True, capture_output=True, text=True, cwd=tmp_path, env=clean_env
    )
    assert result.stdout.startswith("ok ")
