"""Start a function in N processes that share one ``torch.distributed`` group.

This is the single-node launcher used by the tests of every trainsys package and
by ``benchkit``'s self-spawning benchmarks. Under ``torchrun`` you do not need it:
``torchrun`` starts the processes and sets the rendezvous variables itself.

Each run rendezvouses on a port the operating system hands out at that moment
(never a fixed one), so concurrent runs on one machine do not collide. The
parent waits for all ranks with one overall deadline; a rank that raises, dies or
outlives the deadline turns into an exception in the parent that names the rank,
so a bug shows up as a failure instead of a hung job.

Example::

    import torch
    import torch.distributed as dist
    from ddp.launch import spawn


    def total(rank, world_size, base):
        x = torch.tensor([base + rank], dtype=torch.float64)
        dist.all_reduce(x)
        return x.item()


    assert spawn(total, world_size=3, args=(10.0,)) == [33.0, 33.0, 33.0]
"""

from __future__ import annotations

import datetime
import faulthandler
import multiprocessing as mp
import os
import pickle
import queue
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["DistributedRunError", "find_free_port", "spawn"]


# After a rank fails, the others usually fail soon too (their collectives with it
# break) or block in a collective forever. Their reports are awaited this long, so
# that the root cause and its consequences are reported together.
FAILURE_GRACE_S = 5.0

# A rank asked for its stack (SIGUSR1) writes it at once from a signal handler, even
# while blocked in a collective; the parent reads the files for at most this long.
STACK_DUMP_WAIT_S = 2.0

# The innermost lines of each unfinished rank's stack that a report shows.
_STACK_LINES_SHOWN = 12

# POSIX only; elsewhere the report names the unfinished ranks without their stacks.
_STACK_SIGNAL = getattr(signal, "SIGUSR1", None)


class DistributedRunError(RuntimeError):
    """A rank raised, exited without a result, or missed the deadline."""


def find_free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago (asked of the OS via port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _import_root(fn: Callable[..., Any]) -> str | None:
    """The folder from which ``fn``'s module is importable under its name, if it has a file.

    A module loaded from a file path rather than through ``sys.path`` (pytest's
    ``--import-mode=importlib`` loads ``packages/ddp/tests/test_launch.py`` as
    ``packages.ddp.tests.test_launch``) could not be imported by a fresh process;
    the ranks put this folder on their ``sys.path`` first.
    """
    module = sys.modules.get(fn.__module__)
    file = getattr(module, "__file__", None)
    if fn.__module__ == "__main__" or file is None:
        return None  # multiprocessing re-runs the main script in each rank itself
    path = Path(file).resolve()
    if path.name == "__init__.py":
        path = path.parent
    return str(path.parents[fn.__module__.count(".")])


def _run_rank(
    rank: int,
    world_size: int,
    backend: str,
    port: int,
    call: bytes,
    import_root: str | None,
    timeout_s: float,
    results: mp.Queue[tuple[int, bool, Any]],
    stack_file: str,
) -> None:
    if _STACK_SIGNAL is not None:
        # The file stays open for the life of the process: the handler writes to its descriptor.
        faulthandler.register(_STACK_SIGNAL, file=open(stack_file, "w"), all_threads=True)  # noqa: SIM115
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
    )
    try:
        if import_root is not None and import_root not in sys.path:
            sys.path.append(import_root)
        fn, args = pickle.loads(call)
        if backend == "nccl":
            torch.cuda.set_device(rank)
        else:
            # The ranks share this machine's cores: each gets its share instead of one
            # thread per core, as oversubscribed OpenMP pools spin against each other
            # (torchrun sets OMP_NUM_THREADS=1 for the same reason).
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
        dist.init_process_group(
            backend,
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        try:
            value = fn(rank, world_size, *args)
        finally:
            dist.destroy_process_group()
        # Pickled here, by value: torch's multiprocessing queue would otherwise pass
        # tensors as shared-memory handles, which die with this process.
        results.put((rank, True, pickle.dumps(value)))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


def spawn(
    fn: Callable[..., Any],
    world_size: int,
    *,
    args: Sequence[Any] = (),
    backend: str = "gloo",
    timeout_s: float = 120.0,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes.

    Arguments:
        fn: a module-level (picklable) function. It runs after
            ``torch.distributed.init_process_group`` and before
            ``destroy_process_group``; its return value must be picklable
            (tensors come back by value).
        world_size: number of processes, >= 1.
        args: extra positional arguments passed to every rank.
        backend: ``"gloo"`` (CPU tensors; each rank runs with
            ``torch.set_num_threads(max(1, os.cpu_count() // world_size))``,
            its share of this machine's cores) or ``"nccl"`` (rank ``r`` uses
            ``cuda:r``).
        timeout_s: one deadline, in seconds, for the whole run; it is also the
            collective timeout of the process group.

    Returns:
        The ranks' return values, indexed by rank.

    Raises:
        ValueError: ``world_size`` < 1 or an unknown ``backend``.
        DistributedRunError: a rank raised (its traceback is in the message),
            exited without reporting, or was still running at the deadline.
            After a failure the other ranks get ``FAILURE_GRACE_S`` seconds to
            report theirs, which the message includes. The message names the
            ranks that finished and those that had not, with the innermost
            frames of each unfinished rank's Python stack (on POSIX), which show
            the collective it was waiting in. All ranks are terminated before
            this is raised.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if backend == "nccl" and torch.cuda.device_count() < world_size:
        raise ValueError(
            f"backend='nccl' needs one GPU per rank: world_size={world_size}, "
            f"but {torch.cuda.device_count()} CUDA device(s) are visible"
        )

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = find_free_port()
    # Unpickled by each rank once fn's module is importable there (see _import_root).
    call = pickle.dumps((fn, tuple(args)))
    import_root = _import_root(fn)
    stacks_dir = tempfile.TemporaryDirectory(prefix="ddp-launch-stacks-")
    stack_files = [os.path.join(stacks_dir.name, f"rank{rank}.txt") for rank in range(world_size)]
    for path in stack_files:  # empty until the rank dumps its stack (if it started far enough to listen)
        open(path, "w").close()
    procs = [
        ctx.Process(
            target=_run_rank,
            args=(rank, world_size, backend, port, call, import_root, timeout_s, results, stack_files[rank]),
            name=f"rank{rank}",
        )
        for rank in range(world_size)
    ]
    for proc in procs:
        proc.start()

    deadline = time.monotonic() + timeout_s
    values: dict[int, Any] = {}
    failures: dict[int, str] = {}
    unfinished_report = ""
    try:
        while len(values) + len(failures) < world_size:
            try:
                rank, ok, payload = results.get(timeout=0.2)
            except queue.Empty:
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in values and r not in failures]
                # A rank that exited without reporting (killed, segfault) can never report;
                # give the queue a moment in case its result is still in flight.
                if dead and results.empty():
                    time.sleep(0.5)
                    if results.empty():
                        for r in dead:
                            failures[r] = f"exited with code {procs[r].exitcode} and no result"
                        deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
                if time.monotonic() > deadline:
                    running = [r for r in range(world_size) if r not in values and r not in failures]
                    unfinished_report = _unfinished_report(running, sorted(values), procs, stack_files)
                    if failures:
                        break
                    raise DistributedRunError(
                        f"ranks {running} of {world_size} still running after timeout_s={timeout_s}{unfinished_report}"
                    ) from None
                continue
            if ok:
                values[rank] = pickle.loads(payload)
            else:
                failures[rank] = payload
                deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        results.close()
        stacks_dir.cleanup()

    if failures:
        report = "\n".join(f"--- rank {r} ---\n{msg}" for r, msg in sorted(failures.items()))
        raise DistributedRunError(f"{len(failures)} of {world_size} ranks failed:\n{report}{unfinished_report}")
    return [values[r] for r in range(world_size)]


def _unfinished_report(
    running: list[int], finished: list[int], procs: Sequence[mp.process.BaseProcess], stack_files: list[str]
) -> str:
    """Which ranks had finished and which had not, with the innermost frames of each unfinished rank's stack.

    Asks each unfinished, live rank for its stack (see :func:`_run_rank`) and
    waits up to ``STACK_DUMP_WAIT_S`` for the dumps. Empty if every rank ended.
    """
    if not running:
        return ""
    asked = []
    for rank in running:
        if _STACK_SIGNAL is not None and procs[rank].is_alive():
            try:
                os.kill(procs[rank].pid, _STACK_SIGNAL)
                asked.append(rank)
            except ProcessLookupError:  # it ended in the meantime
                pass
    dumps = dict.fromkeys(running, "")
    give_up = time.monotonic() + STACK_DUMP_WAIT_S
    while asked and time.monotonic() < give_up:
        time.sleep(0.1)
        for rank in asked:
            with open(stack_files[rank]) as dump:
                dumps[rank] = dump.read()
        if all(_complete_dump(dumps[rank]) for rank in asked):
            break
    lines = [f"\nfinished: ranks {finished}; not finished: ranks {running}"]
    for rank in running:
        frames = _innermost_frames(dumps[rank])
        collective = _collective_of(frames)
        waits = f", waiting in torch.distributed.{collective}" if collective else ""
        where = "\n".join(frames) if frames else "  (no stack: the rank did not answer)"
        lines.append(f"--- rank {rank} (not finished{waits}); its stack, most recent call first ---\n{where}")
    return "\n".join(lines)


def _complete_dump(text: str) -> bool:
    """Whether a faulthandler dump is complete: it ends with a newline after the outermost frame."""
    return text.endswith("\n") and "File" in text


def _innermost_frames(dump: str) -> list[str]:
    """The main thread's frames in a faulthandler dump of all threads, innermost first, down to ``fn``.

    faulthandler writes each thread as a header line (``Thread 0x...`` or
    ``Current thread 0x...``, then ``(most recent call first):``) followed by its
    frames. The main thread is the one that runs :func:`_run_rank`; its frames
    from there outwards are the launcher's own and are left out.
    """
    threads: list[list[str]] = []
    for line in dump.splitlines():
        if line.startswith(("Thread ", "Current thread ")):
            threads.append([])
        elif line.strip() and threads:
            threads[-1].append(line)
    launcher_frame = f" in {_run_rank.__name__}"
    for frames in threads:
        ends = [i for i, frame in enumerate(frames) if frame.endswith(launcher_frame)]
        if ends:
            return frames[: ends[0]][:_STACK_LINES_SHOWN]
    return threads[0][:_STACK_LINES_SHOWN] if threads else []


def _collective_of(frames: list[str]) -> str | None:
    """The torch.distributed function in the innermost frames, e.g. ``all_reduce``, if the rank waits in one."""
    for frame in frames:
        if f"torch{os.sep}distributed{os.sep}distributed_c10d.py" in frame:
            return frame.rsplit(" in ", 1)[-1]
    return None
