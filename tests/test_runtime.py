"""Device parsing, the accelerator check, the per-rank split of inference inputs, the
collectives that put the ranks' blocks back together, and the multi-device launcher: its ranks
die with it and get its SIGINT/SIGTERM, and the CPU thread count every command picks from
--threads, the environment and the load."""

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers import invoke

from goatdna.checkpoint import save_checkpoint
from goatdna.configfile import to_dict
from goatdna.errors import GoatDNAError
from goatdna.model import DNADecoder, ModelConfig
from goatdna.runtime import (
    Runtime,
    choose_cpu_threads,
    gather_blocks,
    on_rank_zero,
    parse_devices,
    rank_block,
    using_cpu_threads,
)


def test_parse_devices_accepts_counts_lists_and_auto() -> None:
    assert parse_devices("auto") == "auto"
    assert parse_devices("2") == 2
    assert parse_devices(-1) == -1
    assert parse_devices("0,1") == [0, 1]


@pytest.mark.parametrize("bad", ["abc", "0", "-2", "1,x", ","])
def test_parse_devices_rejects_with_the_option_name(bad: str) -> None:
    with pytest.raises(GoatDNAError, match="--devices"):
        parse_devices(bad)


def test_gpu_without_cuda_is_a_user_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    with pytest.raises(GoatDNAError, match="no CUDA GPU"):
        Runtime.from_options(accelerator="gpu")
    with pytest.raises(GoatDNAError, match="--accelerator"):
        Runtime.from_options(accelerator="tpu-v9")
    with pytest.raises(GoatDNAError, match="^num_nodes must be >= 1, got 0$"):
        Runtime.from_options(num_nodes=0)


@pytest.mark.parametrize("n_items", [0, 1, 5, 7, 64])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_rank_blocks_tile_the_inputs_in_order(n_items: int, world: int) -> None:
    blocks = [rank_block(n_items, r, world) for r in range(world)]
    assert [i for block in blocks for i in block] == list(range(n_items))
    sizes = [len(b) for b in blocks]
    assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError):
        rank_block(n_items, world, world)


class _ThreadRank:
    """Rank ``rank`` of a world of threads: all_gather and broadcast meet at a barrier, as the
    collectives of a launched Fabric do across processes."""

    def __init__(self, rank: int, world: int, slots: list, barrier: threading.Barrier) -> None:
        self.global_rank, self.world_size, self.slots, self.barrier = rank, world, slots, barrier

    def all_gather(self, tensor):
        self.slots[self.global_rank] = tensor
        self.barrier.wait()
        gathered = torch.stack(list(self.slots))
        self.barrier.wait()  # everyone has read the slots before the next collective
        return gathered

    def broadcast(self, obj, src: int = 0):
        if self.global_rank == src:
            self.slots[src] = obj
        self.barrier.wait()
        value = self.slots[src]
        self.barrier.wait()
        return value


def _run_ranks(world: int, work) -> list:
    slots: list = [None] * world
    barrier = threading.Barrier(world, timeout=30)
    results: list = [None] * world

    def run(rank: int) -> None:
        try:
            results[rank] = work(_ThreadRank(rank, world, slots, barrier))
        except Exception as err:  # handed back to the test
            results[rank] = err

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.parametrize(("n_rows", "world"), [(7, 3), (2, 3), (6, 2), (0, 2)])
def test_gather_blocks_restores_input_order_on_every_rank(n_rows: int, world: int) -> None:
    rows = torch.arange(n_rows * 2, dtype=torch.float32).reshape(n_rows, 2)

    def work(fabric):
        block = rank_block(n_rows, fabric.global_rank, world)
        return gather_blocks(fabric, rows[block.start : block.stop], n_rows)

    for gathered in _run_ranks(world, work):
        assert torch.equal(gathered, rows)


def test_on_rank_zero_shares_its_result_and_its_error() -> None:
    calls: list[int] = []

    def listing(fabric):
        return on_rank_zero(fabric, lambda: calls.append(fabric.global_rank) or [3, 5])

    assert _run_ranks(3, listing) == [[3, 5]] * 3 and calls == [0]

    def refuse() -> None:
        raise GoatDNAError("work folder exists; pass --resume")

    results = _run_ranks(2, lambda fabric: on_rank_zero(fabric, refuse))
    assert all(isinstance(r, GoatDNAError) and "--resume" in str(r) for r in results)


def test_single_device_is_one_torch_device() -> None:
    from goatdna.runtime import single_device

    assert single_device("cpu", "1") == "cpu"
    assert single_device("cpu", "auto") == "cpu"
    assert single_device("cpu", "0,") == "cpu"
    if not torch.cuda.is_available():
        assert single_device("auto", "1") in ("cpu", "mps")
        with pytest.raises(GoatDNAError, match="--accelerator cuda"):
            single_device("cuda", "1,")
    else:
        assert single_device("cuda", "1") == "cuda:0"
        last = torch.cuda.device_count() - 1
        assert single_device("gpu", f"{last},") == f"cuda:{last}"
        with pytest.raises(GoatDNAError, match="no CUDA GPU"):
            single_device("cuda", f"{last + 1},")
    for many in ("2", "-1", "0,1"):
        with pytest.raises(GoatDNAError, match="one device"):
            single_device("cpu", many)
    with pytest.raises(GoatDNAError, match="device ids name GPUs"):
        single_device("cpu", "1,")


def test_a_closing_line_is_printed_by_the_first_process_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: train, finetune and predict printed their summary once per rank under --devices 2."""
    from goatdna.cli.common import say_once

    say_once("wrote x")
    monkeypatch.setenv("LOCAL_RANK", "1")
    say_once("wrote y")
    say_once("warning: z", err=True)
    captured = capsys.readouterr()
    assert captured.out == "wrote x\n" and captured.err == ""


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
def test_multi_device_ranks_die_with_their_launcher(tmp_path: Path) -> None:
    """kill -9 of ``score-variants --devices 2``'s launcher: rank 1 used to go on scoring into
    the work folder for half a minute (a --resume then shared it with an orphan)."""
    import random
    import signal
    import subprocess
    import sys
    import time

    rng = random.Random(0)
    seq = "".join(rng.choice("ACGT") for _ in range(20_000))
    (tmp_path / "ref.fa").write_text(">chr1\n" + seq + "\n")
    rows = [f"chr1\t{p}\t.\t{seq[p - 1]}\t{'A' if seq[p - 1] != 'A' else 'C'}\t.\t.\t."
            for p in range(300, 19_700, 5)]  # fmt: skip
    header = "##fileformat=VCFv4.2\n##contig=<ID=chr1,length=20000>\n"
    header += "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
    (tmp_path / "v.vcf").write_text(header + "\n".join(rows) + "\n")
    config = ModelConfig(n_layers=2, d_model=64, n_heads=2, mlp_hidden=128, train_length=256,
                         goat_modes=2)  # fmt: skip
    ckpt = save_checkpoint(tmp_path / "m.ckpt", DNADecoder(config), {"model": to_dict(config)})
    out = tmp_path / "s.tsv"
    cmd = [sys.executable, "-m", "goatdna.cli.app", "score-variants", "-c", str(ckpt),
           "--fasta", str(tmp_path / "ref.fa"), "--vcf", str(tmp_path / "v.vcf"),
           "--out", str(out), "--window", "256", "--chunk-size", "64",
           "--accelerator", "cpu", "--devices", "2"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launcher = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    work = tmp_path / ".s.tsv.goatdna-work"
    try:
        deadline = time.monotonic() + 120
        while not list(work.glob("chunk-*")) and launcher.poll() is None:
            assert time.monotonic() < deadline, "score-variants never started scoring"
            time.sleep(0.1)
        ranks = _children(launcher.pid)
        assert launcher.poll() is None and ranks, launcher.stderr.read().decode()[-2000:]
        launcher.kill()  # kill -9: no handler runs in the launcher
        launcher.wait()
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in ranks) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in ranks), "rank 1 outlived its launcher"
    finally:
        for pid in _children(launcher.pid) if launcher.poll() is None else []:
            os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()
        launcher.wait()


def test_the_launcher_forwards_sigint_and_sigterm_to_its_ranks() -> None:
    import signal
    import subprocess

    from goatdna.runtime import forward_stop_signals

    received: list[int] = []
    rank = subprocess.Popen(["sleep", "60"])
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGTERM, lambda signum, _frame: received.append(signum))
        forward_stop_signals([rank])
        os.kill(os.getpid(), signal.SIGTERM)  # a `kill PID` of the launcher only
        assert rank.wait(timeout=10) == -signal.SIGTERM
        assert received == [signal.SIGTERM]  # then handled here as before
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if rank.poll() is None:
            rank.kill()


def test_thread_choice_respects_the_option_then_the_environment_then_the_load() -> None:
    assert choose_cpu_threads(3, {}).threads == 3
    with pytest.raises(Exception, match="--threads must be >= 1"):
        choose_cpu_threads(0, {})
    env = choose_cpu_threads(None, {"OMP_NUM_THREADS": "2"}, cores=8, load=7.0)
    assert env.threads is None and "OMP_NUM_THREADS=2" in env.reason
    assert choose_cpu_threads(None, {"MKL_NUM_THREADS": "4"}).threads is None
    assert choose_cpu_threads(None, {}, cores=2, load=5.0).threads == 1  # busy: one thread
    assert choose_cpu_threads(None, {}, cores=2, load=0.1).threads == 2  # idle: every core
    assert choose_cpu_threads(None, {}, cores=16, load=6.2).threads == 10
    assert choose_cpu_threads(None, {"OMP_NUM_THREADS": " "}, cores=4, load=0.0).threads == 4


@pytest.fixture
def no_thread_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    yield
    torch.set_num_threads(before)


def test_every_command_runs_on_the_threads_the_load_leaves(
    monkeypatch: pytest.MonkeyPatch, no_thread_env: None, tmp_path
) -> None:
    import torch

    torch.set_num_threads(2)
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 5.0, 5.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    result = invoke(["model-info", str(tmp_path / "nope.ckpt")])
    assert result.exit_code == 2  # the command itself: a missing checkpoint
    assert os.environ["OMP_NUM_THREADS"] == "1" and torch.get_num_threads() == 1
    # a command asking later (the demo, to say it) gets the CLI's reason, not "OMP_NUM_THREADS=1"
    assert choose_cpu_threads().reason.startswith("1 (load 5.0 on 2 cores")


def test_using_cpu_threads_restores_the_callers_setting(no_thread_env: None) -> None:
    import torch

    torch.set_num_threads(2)
    with using_cpu_threads(choose_cpu_threads(1, {})):
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
    assert torch.get_num_threads() == 2 and "OMP_NUM_THREADS" not in os.environ
