"""One place that decides devices, precision and the distributed layout of every loop.

Every goatdna loop (training, fine-tuning, and the inference commands `score-variants`,
`score-track`, `embed` and `predict`) is a plain Python loop over the `lightning_fabric.Fabric`
that `Runtime.fabric` launches, so device parsing, the accelerator check and how inputs are split
over ranks have one definition. An inference loop moves the model to ``fabric.device`` (no DDP
wrapper: nothing is trained), each rank takes a contiguous block of the inputs (`rank_block`),
and the blocks are gathered in rank order (`gather_blocks`), which is the single-process order
exactly; global rank 0 writes the output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # torch and Lightning are imported inside the functions that use them
    import torch
    from lightning_fabric import Fabric
    from lightning_fabric.loggers import Logger
    from lightning_fabric.strategies import Strategy

from goatdna.configfile import COUNT, bounded, check_bounds, comma_list
from goatdna.errors import GoatDNAError

ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")
T = TypeVar("T")


def parse_devices(value: int | str, option: str = "--devices") -> int | str | list[int]:
    """``"auto"``, a count (``"2"``, ``-1`` for all) or a list of ids (``"0,1"``); else a user error."""
    if isinstance(value, int):
        count: int | str | list[int] = value
    else:
        text = value.strip()
        if text == "auto":
            return text
        try:
            count = [int(part) for part in comma_list(text)] if "," in text else int(text)
        except ValueError:
            raise GoatDNAError(
                f"{option} {value!r}: expected a count (e.g. 2), -1 for all, 'auto', "
                "or a list of device ids such as 0,1"
            ) from None
    if isinstance(count, int) and count < 1 and count != -1:
        raise GoatDNAError(f"{option} {value!r}: must be >= 1 (or -1 for all devices)")
    if isinstance(count, list) and (not count or min(count) < 0):
        raise GoatDNAError(f"{option} {value!r}: device ids must be non-negative")
    return count


def check_accelerator(accelerator: str) -> str:
    """Validate an accelerator name and fail clearly when a GPU is asked for but absent."""
    import torch

    if accelerator not in ACCELERATORS:
        raise GoatDNAError(
            f"--accelerator {accelerator!r}: expected one of {', '.join(ACCELERATORS)}"
        )
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise GoatDNAError(
            f"--accelerator {accelerator}: no CUDA GPU is visible to this process; "
            "use --accelerator cpu (or auto)"
        )
    mps = getattr(torch.backends, "mps", None)
    if accelerator == "mps" and not (mps is not None and mps.is_available()):
        raise GoatDNAError(
            "--accelerator mps: no Apple GPU (MPS) here; use --accelerator cpu (or auto)"
        )
    return accelerator


def runs_on_cuda(accelerator: str) -> bool:
    """True when ``accelerator`` will put the work on a CUDA GPU (``auto`` does when one is
    visible): what precision, TF32 and device counting follow."""
    import torch

    return accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()


def resolve_precision(precision: str, accelerator: str) -> str:
    """``auto``: bf16-mixed on a bf16-capable GPU, 16-mixed on older GPUs, 32-true on CPU."""
    import torch

    if precision != "auto":
        return precision
    if runs_on_cuda(accelerator):
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    return "32-true"


def single_device(accelerator: str = "cpu", devices: int | str = 1) -> str:
    """The one torch device (``cpu``, ``cuda:N`` or ``mps``) of a single-process command.

    `evaluate`, `generate`, `report` and `probe-recall` run one process on one device but take
    the same ``--accelerator``/``--devices`` as the multi-device commands, so a command line
    moves between them unchanged. ``--devices`` here is ``1`` (or ``auto``): the first device
    of the accelerator; a GPU other than the first is named in Lightning's id-list syntax, a
    trailing comma: ``--devices 1,`` is ``cuda:1``. More than one device is one user error
    (these commands do not launch ranks). ``auto`` picks CUDA when a GPU is visible, else MPS
    when present, else the CPU, as Lightning's ``auto`` does.
    """
    import torch

    check_accelerator(accelerator)
    parsed = parse_devices(devices)
    if parsed == "auto":
        parsed = 1
    if (
        parsed == -1
        or (isinstance(parsed, int) and parsed > 1)
        or (isinstance(parsed, list) and len(parsed) > 1)
    ):
        raise GoatDNAError(
            f"--devices {devices}: this command runs on one device; pass --devices 1, or one "
            "device id with a trailing comma (--devices 1, is cuda:1)"
        )
    kind = accelerator
    if kind == "auto":
        mps = getattr(torch.backends, "mps", None)
        kind = (
            "cuda"
            if torch.cuda.is_available()
            else "mps"
            if mps is not None and mps.is_available()
            else "cpu"
        )
    if kind == "gpu":
        kind = "cuda"
    index = parsed[0] if isinstance(parsed, list) else None
    if kind != "cuda":
        if index is not None and index != 0:
            raise GoatDNAError(
                f"--devices {devices}: --accelerator {accelerator} has one device here; "
                "device ids name GPUs"
            )
        return kind
    visible = torch.cuda.device_count()
    if index is not None and index >= visible:
        raise GoatDNAError(
            f"--devices {devices}: no CUDA GPU {index} here ({visible} visible; ids start at 0)"
        )
    return f"cuda:{index or 0}"


@dataclass(frozen=True)
class Runtime:
    """Where a loop runs: Lightning's accelerator, devices per node and nodes."""

    accelerator: str = "auto"
    devices: int | str | list[int] = 1
    num_nodes: int = bounded(1, COUNT)
    precision: str = "32-true"

    @classmethod
    def from_options(
        cls,
        accelerator: str = "auto",
        devices: int | str = 1,
        num_nodes: int = 1,
        precision: str = "32-true",
    ) -> Runtime:
        """Build from CLI values, turning every bad one into a one-line user error."""
        return cls(check_accelerator(accelerator), parse_devices(devices), num_nodes, precision)

    def __post_init__(self) -> None:
        check_bounds(self, GoatDNAError)

    def fabric(
        self, strategy: Strategy | str = "auto", loggers: list[Logger] | None = None
    ) -> Fabric:
        """A launched `lightning_fabric.Fabric` on these devices: every goatdna loop (training,
        fine-tuning, inference) is a plain Python loop over Fabric, which owns only devices,
        precision, the distributed strategy and collectives.

        With ``devices > 1`` and no external launcher, ``launch()`` re-runs the current command
        once per extra device (Lightning's subprocess launcher), as ``torchrun`` would.
        """
        from lightning_fabric import Fabric

        fabric = Fabric(
            accelerator=self.accelerator,
            devices=self.devices,
            num_nodes=self.num_nodes,
            precision=self.precision,  # type: ignore[arg-type]
            strategy=strategy,
            loggers=loggers,
        )
        worker_of = launched_by()
        if worker_of is not None:  # a rank started by our launch: it must not outlive it
            die_with_parent(worker_of)
        elif "LOCAL_RANK" not in os.environ:  # Lightning's launcher will start the other ranks
            os.environ[LAUNCHER_ENV] = str(os.getpid())
        fabric.launch()
        children = getattr(fabric.strategy.launcher, "procs", None) or []
        if children:  # this process launched the other ranks (Lightning's launcher)
            forward_stop_signals(children)
        return fabric


# -------------------------------------------------------------------- launcher and its workers
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """Make the kernel SIGKILL this process when its parent dies, even by ``kill -9``.

    The one guard of every worker process goatdna starts (`prepare`'s pool, the ranks
    Lightning's launcher starts for ``--devices N``): a worker whose launcher is gone has
    nobody to hand its results to and would only keep writing into a work folder that a
    ``--resume`` may already be using. Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``. Elsewhere
    (or if prctl is unavailable) a daemon thread polls the parent pid once a second.
    """
    armed = False
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if not armed:
        threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the guard was armed
        os._exit(1)


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(1)


def is_first_process() -> bool:
    """False in a rank other than the first, before or after its Fabric is launched (the
    launchers' environment says so): what a command prints once, not once per rank."""
    for name in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"):
        value = os.environ.get(name, "0")
        if value.isdigit() and int(value) > 0:
            return False
    return True


LAUNCHER_ENV = "GOATDNA_LAUNCHER_PID"
"""Set by a process about to launch ranks itself; its children inherit it with LOCAL_RANK > 0."""


def launched_by() -> int | None:
    """The launcher's pid when this process is a rank that goatdna's own launch started
    (Lightning's subprocess launcher: ``LOCAL_RANK`` > 0 and `LAUNCHER_ENV` inherited), else
    None. torchrun and SLURM start every rank themselves and end them when one fails; only
    Lightning's launcher starts ranks as plain children that nothing else ends. The pid is
    read from the environment, not from ``getppid()``, so a rank whose launcher died before
    this check sees that it did."""
    local, launcher = os.environ.get("LOCAL_RANK", ""), os.environ.get(LAUNCHER_ENV, "")
    if local.isdigit() and int(local) > 0 and launcher.isdigit() and int(launcher) != os.getpid():
        return int(launcher)
    return None


def forward_stop_signals(children: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGINT and SIGTERM sent to this launcher are sent on to its worker ranks too, then
    handled here as before: a stop meant for the command stops all of its processes (a
    terminal's Ctrl-C reaches them anyway; a ``kill PID`` or a scheduler's SIGTERM reaches the
    launcher only). A handler installed later (the training loop's, which stops every rank at
    one optimizer step) replaces this one for its block."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            previous = signal.getsignal(signum)
            signal.signal(signum, _forwarder(children, previous))
        except ValueError:  # not the main thread: leave signals to the caller
            return


def _forwarder(
    children: Sequence[subprocess.Popen[bytes]],
    previous: Callable[[int, FrameType | None], object] | int | None,
) -> Callable[[int, FrameType | None], None]:
    def forward(received: int, frame: FrameType | None) -> None:
        for child in children:
            if child.poll() is None:  # never a finished child's pid, which may be reused
                with contextlib.suppress(OSError):
                    child.send_signal(received)
        if callable(previous):
            previous(received, frame)
        elif previous != signal.SIG_IGN:  # the default action: end this process by the signal
            signal.signal(received, signal.SIG_DFL)
            os.kill(os.getpid(), received)

    return forward


def rank_block(n_items: int, rank: int, world_size: int) -> range:
    """The contiguous block of ``range(n_items)`` that ``rank`` of ``world_size`` processes.

    Blocks differ in size by at most one and, concatenated in rank order, are ``range(n_items)``.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of size {world_size}")
    base, extra = divmod(n_items, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))


def single_process_fabric() -> Fabric:
    """The Fabric of a plain one-process CPU run: the library functions' default."""
    return Runtime.from_options("cpu", 1).fabric()


def gather_blocks(fabric: Fabric, local: torch.Tensor, n_total: int) -> torch.Tensor:
    """Every rank's `rank_block` rows (a tensor, first dim) concatenated in rank order.

    ``fabric`` is the launched Fabric of the loop (``fabric.all_gather`` does the transfer);
    blocks are padded to one size for the collective and trimmed again. One process: ``local``.
    """
    import torch

    world = fabric.world_size
    if world == 1:
        return local
    per = -(-n_total // world)
    padded = torch.zeros(per, *local.shape[1:], dtype=local.dtype, device=local.device)
    padded[: local.shape[0]] = local
    gathered = fabric.all_gather(padded)  # (world, per, ...): a tensor for a tensor
    assert isinstance(gathered, torch.Tensor)
    return torch.cat([gathered[r, : len(rank_block(n_total, r, world))] for r in range(world)])


def gather_objects(fabric: Fabric, local: list[T]) -> list[T]:
    """Every rank's list (arrays of any shape) concatenated in rank order, on every rank.

    For results a tensor collective cannot hold (per-base embeddings differ in length);
    one process: ``local``.
    """
    if fabric.world_size == 1:
        return local
    import torch.distributed

    parts: list[list[T] | None] = [None] * fabric.world_size
    torch.distributed.all_gather_object(parts, local)
    return [item for part in parts for item in part or []]


def on_rank_zero(fabric: Fabric, action: Callable[[], T]) -> T:
    """Run ``action`` on global rank 0 only and give every rank its result (a broadcast).

    For what one process must decide for all (which chunks are unfinished, a work folder made
    or checked): a `GoatDNAError` raised there is raised on every rank, so none waits forever
    at the next collective.
    """
    result: T | None = None
    error: str | None = None
    if fabric.global_rank == 0:
        try:
            result = action()
        except GoatDNAError as err:
            error = str(err)
    if fabric.world_size > 1:
        result, error = fabric.broadcast((result, error), src=0)
    if error is not None:
        raise GoatDNAError(error)
    return result  # type: ignore[return-value]


# ----------------------------------------------------------------------------- CPU threads

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # torch sizes its CPU pool from these
_applied: ThreadChoice | None = None  # the last choice `apply_cpu_threads` made in this process


@dataclass(frozen=True)
class ThreadChoice:
    """How many torch CPU threads a command uses, and why (said by the demo)."""

    threads: int | None  # None: torch's own setting (the environment chose it)
    reason: str
    from_load: bool = False  # only the machine's load chose it: nobody asked for this count


def choose_cpu_threads(
    requested: int | None = None,
    environ: dict[str, str] | None = None,
    cores: int | None = None,
    load: float | None = None,
) -> ThreadChoice:
    """``--threads`` if given; else ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` if set (torch reads
    them); else the cores the 1-minute load average leaves free, at least 1.

    Why not torch's default (one thread per core): on a machine that other work keeps busy,
    OpenMP threads of one process wait on each other at every operation, and demo-like work runs
    several times slower with more threads than free cores (`benchmarks/threads_bench.py`; the
    numbers live in benchmarks/README.md, "threads"); on an idle machine every core is free and
    all are used.
    """
    if requested is not None:
        if requested < 1:
            raise GoatDNAError(f"--threads must be >= 1, got {requested}")
        return ThreadChoice(requested, f"{requested} (--threads)")
    if environ is None:
        environ = dict(os.environ)
        if _applied is not None and environ.get("OMP_NUM_THREADS") == str(_applied.threads):
            return _applied  # the variable is ours (the CLI's choice): say why it was made
    for name in THREAD_ENV:
        if environ.get(name, "").strip():
            return ThreadChoice(None, f"torch's setting ({name}={environ[name].strip()})")
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average here: assume an idle machine
            load = 0.0
    free = max(1, min(cores, round(cores - load)))
    return ThreadChoice(
        free,
        f"{free} (load {load:.1f} on {cores} cores; --threads N or OMP_NUM_THREADS=N to choose)",
        from_load=True,
    )


def cpu_threads_in_use() -> int | None:
    """torch's CPU thread count now (None before torch is imported: nothing has run on it)."""
    torch_module = sys.modules.get("torch")
    return None if torch_module is None else int(torch_module.get_num_threads())


def keep_cpu_threads(recorded: object) -> str | None:
    """Run on ``recorded`` CPU threads (what a resumed run started with) when this process's
    count came only from the load, and return a note saying so; None when nothing changes.

    Why: sums split by thread count, so a CPU run resumed on another count than it started on
    does not end byte-identical to an uninterrupted one. A count someone asked for
    (``--threads``, ``OMP_NUM_THREADS``) is kept as asked."""
    if _applied is None or not _applied.from_load or not isinstance(recorded, int):
        return None
    if recorded < 1 or recorded == cpu_threads_in_use():
        return None
    apply_cpu_threads(ThreadChoice(recorded, f"{recorded} (the count this run started with)"))
    return (
        f"note: {recorded} CPU thread(s), as this run started with, so it ends as an "
        "uninterrupted run would (OMP_NUM_THREADS=N to choose)"
    )


@contextlib.contextmanager
def using_cpu_threads(choice: ThreadChoice) -> Iterator[None]:
    """`apply_cpu_threads` for a block; the caller's environment and torch setting come back."""
    before_env = os.environ.get("OMP_NUM_THREADS")
    torch_module = sys.modules.get("torch")
    before = torch_module.get_num_threads() if torch_module is not None else None
    apply_cpu_threads(choice)
    try:
        yield
    finally:
        if before_env is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = before_env
        torch_module = sys.modules.get("torch")
        if torch_module is not None:
            torch_module.set_num_threads(before or torch_module.get_num_threads())


def apply_cpu_threads(choice: ThreadChoice) -> None:
    """Make ``choice`` torch's thread count for this process and the processes it starts.

    Before torch is imported this sets ``OMP_NUM_THREADS`` (torch sizes its pool from it at
    start, and workers that Lightning launches inherit it), so the CLI pays no torch import for
    it; after, it also calls ``torch.set_num_threads``.
    """
    global _applied
    if choice.threads is None:
        return
    _applied = choice
    os.environ["OMP_NUM_THREADS"] = str(choice.threads)
    torch_module = sys.modules.get("torch")
    if torch_module is not None:
        torch_module.set_num_threads(choice.threads)
