"""The run directory: its layout, the resolved config, and the rules for reusing it.

::

    RUN_DIR/
      config.yaml            fully resolved RunConfig + data_manifest_sha256 + goatdna_version
      checkpoints/last.ckpt  every trainer.ckpt_every steps and at the end (what --resume reads)
      checkpoints/best.ckpt  lowest validation loss so far
      metrics.csv            step, train_loss, val_loss, lr, tokens_per_s, grad_norm, elapsed_s
      summary.json           written at the end (see `SUMMARY_KEYS`)
      tensorboard/           when TensorBoard is installed and trainer.tensorboard is true

Every file is written to a temporary name in the same directory and renamed when complete, so a
file that exists is whole. A directory that holds another run is never silently reused.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from goatdna import __version__
from goatdna.atomic import atomic_write_text, check_free_space
from goatdna.configfile import load_yaml, to_dict
from goatdna.errors import GoatDNAError
from goatdna.formats import json_text
from goatdna.runtime import cpu_threads_in_use, is_first_process, keep_cpu_threads
from goatdna.training.checkpoints import training_checkpoint_problem, training_checkpoint_step
from goatdna.training.config import PROVENANCE_KEYS, RunConfig

SUMMARY_KEYS = (
    "positional",
    "params",
    "steps",
    "tokens_seen",
    "train_loss",
    "val_loss",
    "val_bits_per_base",
    "tokens_per_s",
    "mfu",
    "peak_memory_bytes",
    "device",
    "precision",
    "wall_seconds",
)
"""Keys summary.json always holds (with finite values, but ``mfu``, which is null where no peak
FLOP/s is known or the achieved rate exceeds a measured one: ``mfu_note`` then says why); it
holds a few more for context."""

RESUMABLE_KEYS = frozenset(
    {
        # where an adapter run's backbone lies (a run moved with it, or one written before the
        # relative path was recorded), and finetune's --checkpoint given again on resume (the run
        # was moved away from it); which backbone it is stays pinned by its sha256
        "backbone.checkpoint",
        "adapter.backbone",
        "adapter.backbone_relative",
        "trainer.max_steps",
        "trainer.devices",
        "trainer.num_nodes",
        "trainer.strategy",
        "trainer.accelerator",
        "trainer.eval_every",
        "trainer.early_stop_evals",
        "trainer.ckpt_every",
        "trainer.log_every",
        "trainer.throughput_warmup",
        "trainer.peak_flops",
        "trainer.tensorboard",
        "trainer.progress_bar",
        "data.num_workers",
        "data.verify",
    }
)
"""Config keys a --resume may change: how long and where to run, not what is learned."""

RUN_ENTRIES = ("config.yaml", "checkpoints", "metrics.csv", "summary.json", "tensorboard")
"""What a run writes at the top of its directory (a directory holding any of them holds a run)."""

CACHE_DIR = "cache"
"""Where a run keeps work it can reuse on a rerun (finetune's probe features)."""

CHECKPOINT_FILES = ("last.ckpt", "best.ckpt")
TENSORBOARD_PATTERNS = ("events.out.tfevents.*", "hparams.yaml")
"""What --force removes inside checkpoints/ and tensorboard/: only files goatdna wrote (plus
their temporary names); anything else there (a backup.ckpt, notes) is kept and named."""


def resolved_config(config: RunConfig, manifest_sha256: str) -> dict[str, Any]:
    """The config.yaml mapping: every field spelled out, plus what the run was trained on."""
    out = to_dict(config)
    out["data_manifest_sha256"] = manifest_sha256
    out["goatdna_version"] = __version__
    return out


def _flatten(data: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flatten(value, f"{path}.")
        else:
            yield path, value


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old value, new value) for every dotted key whose value differs."""
    a = dict(_flatten({k: v for k, v in old.items() if k not in PROVENANCE_KEYS}))
    b = dict(_flatten({k: v for k, v in new.items() if k not in PROVENANCE_KEYS}))
    missing = object()
    return [
        (key, a.get(key, missing), b.get(key, missing))
        for key in sorted(set(a) | set(b))
        if a.get(key, missing) != b.get(key, missing)
    ]


RESUME_HINT = "rerun the same command with --resume (it continues from the last checkpoint)"


@dataclass(frozen=True)
class StartPlan:
    """What `RunDir.check` decided: the checkpoint to resume from, and whether to clear first."""

    checkpoint: Path | None
    clear: bool


@dataclass(frozen=True)
class RunDir:
    """Paths of one run directory and the checks that guard it."""

    root: Path

    @property
    def config_yaml(self) -> Path:
        return self.root / "config.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def last_ckpt(self) -> Path:
        return self.checkpoints / "last.ckpt"

    @property
    def best_ckpt(self) -> Path:
        return self.checkpoints / "best.ckpt"

    @property
    def metrics_csv(self) -> Path:
        return self.root / "metrics.csv"

    @property
    def summary_json(self) -> Path:
        return self.root / "summary.json"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tensorboard"

    def holds_run(self) -> bool:
        return any((self.root / name).exists() for name in RUN_ENTRIES)

    def refuse_foreign(self, inputs: dict[str, str | None], own: tuple[str, ...] = ()) -> None:
        """Refuse a run directory that is not a run's: an input lying inside it (``--force``
        would clear it, a run would write over it), or a folder of other files (the run's
        files would be scattered among a user's). ``own``: further names the command writes
        there (e.g. finetune's ``cache``). ``inputs``: option name -> path."""
        root = self.root.resolve()
        for name, path in inputs.items():
            if path and (Path(path).resolve() == root or root in Path(path).resolve().parents):
                raise GoatDNAError(
                    f"{name} {path} lies inside --out {self.root}; the run would write over or "
                    "clear it: choose another --out"
                )
        if self.root.is_dir() and not self.holds_run():
            other = sorted(p.name for p in self.root.iterdir() if p.name not in own)
            if other:
                shown = ", ".join(other[:3]) + (
                    f" and {len(other) - 3} more" if len(other) > 3 else ""
                )
                raise GoatDNAError(
                    f"--out {self.root} holds files that are not a goatdna run ({shown}); "
                    "choose a new or empty folder"
                )

    def check(self, resolved: dict[str, Any], *, resume: bool | str, force: bool) -> StartPlan:
        """Every check before a run starts here, reading only (`start` then writes): every rank
        of a multi-process run calls it before any rendezvous, so a user error stops all ranks at
        once instead of leaving the others waiting for rank 0 until a timeout.

        ``resume="auto"``: resume when ``last.ckpt`` exists, else start fresh (also over the
        files of this very run, same config, killed before its first checkpoint), so a
        requeued or preempted job is relaunched with the same command line.
        """
        if resume not in (True, False, "auto"):
            raise GoatDNAError(f"--resume {resume!r}: expected no value or 'auto'")
        if resume and force:
            raise GoatDNAError("--resume and --force contradict each other: pick one")
        if self.root.exists() and not self.root.is_dir():
            raise GoatDNAError(f"run dir {self.root} exists and is not a directory")
        if resume == "auto":
            if self.last_ckpt.is_file():
                resume = True
            else:
                resume, force = False, force or self.holds_same_run(resolved)
        if resume:
            if not self.last_ckpt.is_file():
                raise GoatDNAError(
                    f"--resume: no checkpoint at {self.last_ckpt}; run without --resume to start"
                )
            self._check_resumable(resolved)
            self._check_resume_checkpoint()
            return StartPlan(checkpoint=self.last_ckpt, clear=False)
        if self.holds_run() and not force:
            raise GoatDNAError(self._occupied_message(resolved))
        return StartPlan(checkpoint=None, clear=self.holds_run())

    def holds_same_run(self, resolved: dict[str, Any]) -> bool:
        """Whether config.yaml here describes this very run: no key differs from ``resolved``
        (`config_differences`, provenance aside). How ``--resume auto`` tells its own run killed
        before its first checkpoint from another one, and `goatdna demo` a run it may keep."""
        stored = self._stored_config()
        return stored is not None and not config_differences(stored, resolved)

    def start(self, resolved: dict[str, Any], plan: StartPlan) -> None:
        """What `check` allowed (one process, rank 0): clear a previous run, write config.yaml."""
        if plan.clear:
            kept = self.clear()
            if kept:
                shown = ", ".join(str(p.relative_to(self.root)) for p in kept[:5])
                more = f" and {len(kept) - 5} more" if len(kept) > 5 else ""
                print(
                    f"note: --force kept {len(kept)} file(s) goatdna did not write: {shown}{more}",
                    file=sys.stderr,
                )
        self.root.mkdir(parents=True, exist_ok=True)
        self.write_config(resolved)

    def _stored_config(self) -> dict[str, Any] | None:
        if not self.config_yaml.is_file():
            return None
        return load_yaml(self.config_yaml)

    def _occupied_message(self, resolved: dict[str, Any]) -> str:
        stored = self._stored_config()
        if stored is not None:
            diffs = config_differences(stored, resolved)
            if diffs:
                key, old, new = diffs[0]
                more = f" (and {len(diffs) - 1} more keys)" if len(diffs) > 1 else ""
                return (
                    f"run dir {self.root} holds a run with a different config: {key} is "
                    f"{_show(old)} there, {_show(new)} now{more}; pass --force to start over "
                    "there or choose another --out"
                )
        return (
            f"run dir {self.root} already holds a run; pass --resume to continue it, --force "
            "to start over, or choose another --out"
        )

    def _check_resumable(self, resolved: dict[str, Any]) -> None:
        stored = self._stored_config()
        if stored is None:
            raise GoatDNAError(f"--resume: {self.config_yaml} is missing; cannot check the config")
        blocking = [d for d in config_differences(stored, resolved) if d[0] not in RESUMABLE_KEYS]
        if blocking:
            key, old, new = blocking[0]
            raise GoatDNAError(
                f"--resume: {key} is {_show(old)} in {self.config_yaml} but {_show(new)} now; a "
                "resumed run must learn the same thing (only trainer length, devices and logging "
                "may change); use the stored config or start a new --out"
            )
        stored_sha = stored.get("data_manifest_sha256")
        if stored_sha and stored_sha != resolved.get("data_manifest_sha256"):
            raise GoatDNAError(
                f"--resume: the data manifest differs from the one this run was trained on "
                f"(sha256 {stored_sha[:12]}... vs {str(resolved.get('data_manifest_sha256'))[:12]}"
                "...); pass the same --data directory"
            )

    def _check_resume_checkpoint(self) -> None:
        """Read last.ckpt before anything in the run directory changes; offer best.ckpt."""
        problem = training_checkpoint_problem(self.last_ckpt)
        if problem is None:
            return
        offer = "start over with --force"
        best_step = training_checkpoint_step(self.best_ckpt) if self.best_ckpt.is_file() else None
        if best_step is not None:
            offer = (
                f"{self.best_ckpt} (step {best_step}) is intact: copy it over last.ckpt "
                f"(cp {self.best_ckpt} {self.last_ckpt}) and --resume from there, or {offer}"
            )
        raise GoatDNAError(
            f"--resume: {self.last_ckpt} is damaged: {problem}; nothing in {self.root} was "
            f"changed. {offer}"
        )

    def goatdna_files(self) -> tuple[list[Path], list[Path]]:
        """(files a run wrote here, other files inside checkpoints/ and tensorboard/)."""
        ours: list[Path] = []
        foreign: list[Path] = []
        # probe_sweep.*: a fine-tuning probe sweep's table (`training.probe`)
        for name in ("config.yaml", "metrics.csv", "summary.json", "probe_sweep.tsv",
                     "probe_sweep.json"):  # fmt: skip
            path = self.root / name
            if path.exists() or path.is_symlink():
                ours.append(path)
            ours += [p for p in self.root.glob(f".{name}*.tmp") if p.is_file()]
        for folder, patterns in (
            (self.checkpoints, [*CHECKPOINT_FILES, *(f".{n}*.tmp" for n in CHECKPOINT_FILES)]),
            (self.tensorboard, list(TENSORBOARD_PATTERNS)),
        ):
            if not folder.is_dir():
                continue
            mine = {p for pattern in patterns for p in folder.glob(pattern) if p.is_file()}
            ours += sorted(mine)
            foreign += sorted(p for p in folder.rglob("*") if p not in mine and not p.is_dir())
        return ours, foreign

    def clear(self) -> list[Path]:
        """Remove what a previous run wrote here (--force); returns the other files, kept.

        Only goatdna's own files go: config.yaml, metrics.csv, summary.json, last/best.ckpt and
        TensorBoard event files. checkpoints/ and tensorboard/ are removed only when empty.
        """
        ours, foreign = self.goatdna_files()
        for path in ours:
            path.unlink(missing_ok=True)
        for folder in (self.checkpoints, self.tensorboard):
            if folder.is_dir() and not any(folder.rglob("*")):
                folder.rmdir()
        return foreign

    def check_room(self, checkpoint_bytes: int, *, fresh: bool, extra: int = 0) -> None:
        """Before the work: room for what the run will hold here at its fullest. A fresh run
        writes last.ckpt and best.ckpt and, while replacing one, its temporary copy (3
        checkpoints); a resumed one has the first two already (1 more). ``extra``: what else it
        writes (a probe's feature cache)."""
        needed = (3 if fresh else 1) * checkpoint_bytes + extra
        check_free_space(self.root, needed, "this run's checkpoints" + (
            " and feature cache" if extra else ""))  # fmt: skip

    def undo_start(self, *, remove_root: bool) -> None:
        """Remove what a fresh run wrote before it failed with no checkpoint (`clear`), and the
        empty folders it made (``remove_root``: the run directory too, when this run made it).
        Files goatdna did not write stay, and so does finished work of its own kind, such as a
        probe-feature cache written whole (the next run reuses it)."""
        self.clear()
        folders = [self.root / CACHE_DIR, *([self.root] if remove_root else [])]
        for folder in folders:
            with contextlib.suppress(OSError):  # not empty, or gone: leave it
                folder.rmdir()

    def resume_cpu_threads(self) -> None:
        """Before a resumed run's work: the CPU thread count it started with (config.yaml's
        ``cpu_threads``), unless another was asked for (`runtime.keep_cpu_threads`). Every rank
        calls it before the process group starts, so launched workers inherit the count; the first
        process says so."""
        stored = self._stored_config() or {}
        note = keep_cpu_threads(stored.get("cpu_threads"))
        if note is not None and is_first_process():
            print(note, file=sys.stderr)

    def write_config(self, resolved: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        threads = cpu_threads_in_use()
        if threads is not None:
            resolved = {**resolved, "cpu_threads": threads}
        text = yaml.safe_dump(resolved, sort_keys=False)
        atomic_write_text(self.config_yaml, text, then=RESUME_HINT)

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic_write_text(self.summary_json, json_text(summary), then=RESUME_HINT)


def _show(value: object) -> str:
    return (
        "absent"
        if not isinstance(value, (str, int, float, bool, list, type(None)))
        else repr(value)
    )
