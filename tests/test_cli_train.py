"""`goatdna train` under hostile conditions: a concurrent writer, --force beside user files, a
damaged last.ckpt, a full disk, Ctrl-C/SIGTERM, bad devices, empty configs, bad --set values."""

from __future__ import annotations

import errno
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch
import yaml
from helpers import invoke, tiny_train_overrides

from goatdna.errors import GoatDNAError
from goatdna.locking import folder_lock
from goatdna.training import load_run_config, train
from goatdna.training.run import RunDir, resolved_config

REPO = Path(__file__).resolve().parents[1]
CONFIG = str(REPO / "configs" / "goat-tiny.yaml")
OVERRIDES = tiny_train_overrides(
    "optim.warmup_steps=3",
    "trainer.max_steps=12",
    "trainer.eval_every=4",
    "trainer.ckpt_every=4",
    "trainer.log_every=2",
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _config(*extra: str):
    return load_run_config(CONFIG, [*OVERRIDES, *extra])


def _cli_train(*args: str):
    sets = [x for item in OVERRIDES for x in ("--set", item)]
    return invoke(["train", "--config", CONFIG, *sets, *map(str, args)])


def _one_line(result, prefix: str = "error: ", code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert ckpt["global_step"] == 12
    return ckpt["state_dict"]


def _assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.fixture(scope="module")
def reference(synthetic_shards, tmp_path_factory) -> Path:
    """The uninterrupted 12-step run every drill below must reproduce."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run = tmp_path_factory.mktemp("rel_train") / "run"
        train(_config(), synthetic_shards, run)
    finally:
        torch.set_num_threads(threads)
    return run


# ------------------------------------------------------------------------------ locking


def test_second_train_on_a_locked_run_dir_fails_at_once(synthetic_shards, tmp_path):
    run = tmp_path / "run"
    with folder_lock(run, "--out"):
        line = _one_line(_cli_train("--data", synthetic_shards, "--out", run))
    assert "--out" in line and "in use by another goatdna process" in line
    assert f"pid {os.getpid()}" in line
    assert not run.exists()


# ------------------------------------------------------------------------------ --force


def test_force_removes_only_goatdna_files(tmp_path, capsys):
    run = RunDir(tmp_path / "run")
    (run.checkpoints).mkdir(parents=True)
    (run.tensorboard).mkdir()
    ours = [
        run.config_yaml,
        run.metrics_csv,
        run.summary_json,
        run.last_ckpt,
        run.best_ckpt,
        run.checkpoints / ".last.ckpt.tmp",
        run.tensorboard / "events.out.tfevents.1.host.1.0",
        run.tensorboard / "hparams.yaml",
    ]
    theirs = [
        run.checkpoints / "backup.ckpt",
        run.tensorboard / "notes.txt",
        run.root / "README.md",
    ]
    for path in ours + theirs:
        path.write_text("x")
    resolved = resolved_config(_config(), "0" * 64)
    plan = run.check(resolved, resume=False, force=True)
    run.start(resolved, plan)
    assert plan.checkpoint is None
    for path in theirs:
        assert path.read_text() == "x", path
    assert run.config_yaml.is_file() and run.config_yaml.read_text() != "x"
    assert not any(p.exists() for p in ours if p != run.config_yaml)
    err = capsys.readouterr().err
    assert "kept 2 file(s)" in err and "backup.ckpt" in err and "notes.txt" in err


# ------------------------------------------------------------------------------ damaged last.ckpt


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "bit-flipped":
        blob = bytearray(data)
        blob[len(blob) // 2] ^= 0x10  # inside the tensor records
        path.write_bytes(bytes(blob))
    elif how == "text":
        path.write_text("this is not a checkpoint\n")
    else:
        path.write_bytes(b"")


@pytest.mark.parametrize("how", ["truncated", "bit-flipped", "text", "empty"])
def test_damaged_last_ckpt_is_one_line_offers_best_and_changes_nothing(
    reference, synthetic_shards, tmp_path, how
):
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    _damage(run / "checkpoints" / "last.ckpt", how)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in run.rglob("*") if p.is_file()}
    result = invoke(
        ["train", "--out", str(run), "--data", str(synthetic_shards), "--resume",
         "--max-steps", "16"],
    )  # fmt: skip
    line = _one_line(result)
    assert "last.ckpt is damaged" in line and "nothing in" in line
    assert "best.ckpt (step" in line and "cp " in line
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in run.rglob("*") if p.is_file()}
    assert after == before


# ------------------------------------------------------------------------------ disk full


def test_disk_full_at_a_checkpoint_is_one_line_and_resume_matches(
    reference, synthetic_shards, tmp_path, monkeypatch
):
    from lightning_fabric import Fabric

    real_save = Fabric.save

    def filling_save(self, path, state, *args, **kwargs):
        if state["global_step"] == 8:
            Path(path).write_bytes(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(self, path, state, *args, **kwargs)

    monkeypatch.setattr(Fabric, "save", filling_save)
    run = tmp_path / "run"
    sets = [x for item in OVERRIDES for x in ("--set", item)]
    result = invoke(
        ["train", "--config", CONFIG, *sets, "--data", str(synthetic_shards), "--out", str(run)],
    )
    line = _one_line(result)
    assert "disk full while writing" in line and ".ckpt" in line and "--resume" in line
    assert "it needs about" in line and "keeps step 4" in line
    assert not [p for p in run.rglob("*") if ".tmp" in p.name]
    monkeypatch.setattr(Fabric, "save", real_save)

    train(_config(), synthetic_shards, run, resume=True)
    _assert_same_weights(_weights(run), _weights(reference))


# ------------------------------------------------------------------------------ Ctrl-C, SIGTERM


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_checkpoints_the_step_exits_128_plus_signal_and_resume_matches(
    reference, synthetic_shards, tmp_path, monkeypatch, signum, code
):
    from goatdna.training.module import GenomeLM

    real_forward = GenomeLM.forward
    training_calls = []

    def forward_then_signal(self, tokens, reduction="mean"):
        if self.training:  # one micro-batch per step here; validation runs in eval mode
            training_calls.append(1)
            if len(training_calls) == 6:
                os.kill(os.getpid(), signum)  # arrives mid-step 6: step 6 is finished and saved
        return real_forward(self, tokens, reduction)

    monkeypatch.setattr(GenomeLM, "forward", forward_then_signal)
    run = tmp_path / "run"
    line = _one_line(_cli_train("--data", synthetic_shards, "--out", run), "interrupted: ", code)
    assert signal.Signals(signum).name in line
    assert "last.ckpt holds step 6 (stopped after writing it)" in line
    assert f"goatdna train --out {run} --data {synthetic_shards} --resume" in line
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    monkeypatch.setattr(GenomeLM, "forward", real_forward)
    monkeypatch.setattr("goatdna.progress.INTERVAL_S", 0.0)  # a log line every step: short run

    resumed = invoke(
        ["train", "--out", str(run), "--data", str(synthetic_shards), "--resume",
         "--set", "trainer.progress_bar=true"],
    )  # fmt: skip
    assert resumed.exit_code == 0, resumed.output
    _assert_same_weights(_weights(run), _weights(reference))
    assert "12/12" in resumed.output  # the bar counts the whole run's steps, not what is left
    counted = [int(line.split()[1].split("/")[0]) for line in resumed.output.splitlines()
               if line.startswith("train: ")]  # fmt: skip
    assert counted[0] == 7  # counted on from the resumed step


def test_a_resumed_run_keeps_the_thread_count_it_started_with(
    reference, synthetic_shards, tmp_path, monkeypatch
):
    """The CLI sizes torch's CPU pool from the load; a run resumed at another load must still
    compute on the count it started with, or its sums split differently and the weights are
    not an uninterrupted run's."""
    import goatdna.runtime
    from goatdna.training.module import GenomeLM

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(goatdna.runtime, "_applied", None)
    load_says = [1]
    monkeypatch.setattr(goatdna.runtime, "choose_cpu_threads", lambda *a, **k: goatdna.runtime.ThreadChoice(
        load_says[0], f"{load_says[0]} (load)", from_load=True))  # fmt: skip
    real_forward = GenomeLM.forward
    seen: list[int] = []

    def forward_counting_threads(self, tokens, reduction="mean"):
        if self.training:
            seen.append(torch.get_num_threads())
            if len(seen) == 6:
                os.kill(os.getpid(), signal.SIGINT)
        return real_forward(self, tokens, reduction)

    monkeypatch.setattr(GenomeLM, "forward", forward_counting_threads)
    run = tmp_path / "run"
    _one_line(_cli_train("--data", synthetic_shards, "--out", run), "interrupted: ", 130)
    assert yaml.safe_load((run / "config.yaml").read_text())["cpu_threads"] == 1
    load_says[0] = 2  # the machine is idle now: the load alone would give 2 threads
    resumed = _cli_train("--data", synthetic_shards, "--out", run, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert set(seen) == {1}, seen  # steps 7-12 ran on the run's own count
    assert "1 CPU thread(s), as this run started with" in resumed.stderr
    _assert_same_weights(_weights(run), _weights(reference))


# ------------------------------------------------------------------------------ devices, configs


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--devices", "abc"], "--devices 'abc'"),
        (["--accelerator", "gpu"], "--accelerator gpu"),
    ],
)
def test_bad_devices_leave_the_run_dir_untouched(synthetic_shards, tmp_path, flags, fragment):
    if "gpu" in flags and torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    run = tmp_path / "run"
    line = _one_line(_cli_train("--data", synthetic_shards, "--out", run, *flags))
    assert fragment in line
    assert not run.exists()
    if "abc" in flags:  # the corrected command needs no --force
        fixed = _cli_train("--data", synthetic_shards, "--out", run, "--devices", "1")
        assert fixed.exit_code == 0, fixed.output


def test_config_without_model_section_is_refused(synthetic_shards, tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    result = invoke(
        ["train", "--config", str(empty), "--data", str(synthetic_shards), "--out",
         str(tmp_path / "run")],
    )  # fmt: skip
    assert "no `model:` section" in _one_line(result)
    assert not (tmp_path / "run").exists()


def test_large_model_on_cpu_warns(capsys, tmp_path):
    from goatdna.training.preflight import check_before_training

    config = load_run_config(REPO / "configs" / "goat-125m.yaml", ["trainer.accelerator=cpu"])
    check_before_training(config, tmp_path / "run")
    assert "warning: training a 122M-parameter model on the CPU" in capsys.readouterr().err
    check_before_training(_config(), tmp_path / "run")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("override", "fragment"),
    [("optim.betas=[0.9", "not valid YAML"), ("optim.lr=abc", "must be a number")],
)
def test_bad_set_value_names_the_argument_not_the_file(tmp_path, override, fragment):
    result = _cli_train("--data", tmp_path, "--out", tmp_path / "run", "--set", override)
    line = _one_line(result)
    assert line.startswith(f"error: --set '{override}': ") and fragment in line
    assert "goat-tiny.yaml" not in line
    with pytest.raises(GoatDNAError, match="--set"):
        load_run_config(CONFIG, [override])


def test_run_dir_below_a_file_is_one_line(synthetic_shards, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    line = _one_line(_cli_train("--data", synthetic_shards, "--out", blocker / "run"))
    assert "--out" in line and "is a file" in line


def test_disk_full_anywhere_in_training_is_one_line(synthetic_shards, tmp_path, monkeypatch):
    from goatdna.training.module import GenomeLM

    def full(self, tokens, reduction="mean"):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "x"))

    monkeypatch.setattr(GenomeLM, "forward", full)
    line = _one_line(_cli_train("--data", synthetic_shards, "--out", tmp_path / "run"))
    assert "disk full while writing" in line
    # before the first checkpoint nothing could be resumed: the run's files are gone, and the
    # same command (no --resume, no --force) is what runs next
    assert "--resume" not in line and "nothing of this run was kept" in line
    assert not (tmp_path / "run").exists()
    monkeypatch.undo()
    again = _cli_train(
        "--data", synthetic_shards, "--out", tmp_path / "run", "--set", "trainer.max_steps=2"
    )
    assert again.exit_code == 0, again.output
