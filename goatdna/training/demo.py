"""`goatdna demo`'s first two stages: a synthetic genome's shards and two tiny runs on them.

prepare (synthetic genome -> OUT/shards) -> train tiny GOAT and tiny RoPE (OUT/runs/{goat,rope}).
Re-running is cheap and safe: prepared shards are reused (`prepare_synthetic`'s own rule), a
finished run is kept when its run directory holds this very run (`RunDir.holds_same_run`, the rule
``train --resume auto`` tells its own run by) trained to its last step on these shards, and an
interrupted run resumes from its last checkpoint. ``force`` redoes both stages.

The third stage (evaluate, GC% study, plots, report; rebuilt only when a checkpoint or an option
changed) is analysis's: `goatdna.analysis.report.demo_report`. The two rooms may not import
each other (the import contracts in pyproject.toml), so the command, `goatdna.cli.demo`, is what
joins them; each stage's work and its reuse rule live here and there.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goatdna.errors import GoatDNAError

if TYPE_CHECKING:  # the pipeline's modules load when the demo runs, not for `goatdna --help`
    from goatdna.data_prep import ShardedGenome
    from goatdna.training.config import RunConfig

MODELS = ("goat", "rope")


def configs_dir() -> Path:
    """configs/ next to the package (a source checkout), else in the working directory."""
    import goatdna

    for candidate in (Path(goatdna.__file__).resolve().parents[1] / "configs", Path("configs")):
        if (candidate / "goat-tiny.yaml").is_file():
            return candidate
    raise GoatDNAError(
        "configs/goat-tiny.yaml not found: run the demo from a goatdna source checkout "
        "(pip install -e .) or pass --goat-config/--rope-config"
    )


def demo_configs(
    goat_config: Path | None, rope_config: Path | None, overrides: list[str], steps: int
) -> dict[str, RunConfig]:
    """Each model's run config: the given file (default configs/{goat,rope}-tiny.yaml) with
    ``overrides`` and ``steps`` training steps."""
    from goatdna.training.config import load_run_config

    folder = None if goat_config and rope_config else configs_dir()
    paths = {
        "goat": goat_config or folder / "goat-tiny.yaml",  # type: ignore[operator]
        "rope": rope_config or folder / "rope-tiny.yaml",  # type: ignore[operator]
    }
    overrides = [*overrides, f"trainer.max_steps={steps}"]
    return {name: load_run_config(paths[name], overrides) for name in MODELS}


def prepare_demo_genome(out: Path, genome_length: int, force: bool) -> ShardedGenome:
    """OUT/shards: the synthetic genome of ``genome_length`` bases, prepared or reused."""
    from goatdna.data_prep import PrepareOptions, SyntheticGenomeConfig, prepare_synthetic

    shards = out / "shards"
    fresh = not out.exists()
    try:
        return prepare_synthetic(
            shards,
            SyntheticGenomeConfig(total_length=genome_length),
            PrepareOptions(force=force, progress=True),
        )
    except BaseException:
        if fresh:  # the first stage kept nothing: no empty --out is left behind either
            with contextlib.suppress(OSError):
                out.rmdir()
        raise


def finished_summary(
    config: RunConfig, genome: ShardedGenome, run_dir: Path
) -> dict[str, Any] | None:
    """The summary of the run in ``run_dir`` when it is this very run (`RunDir.holds_same_run`)
    finished at its last step on ``genome``'s shards; None when it must be trained or resumed."""
    from goatdna.training.run import RunDir, resolved_config

    run = RunDir(run_dir)
    if not run.summary_json.is_file():
        return None
    try:
        same = run.holds_same_run(resolved_config(config, genome.manifest_sha256))
    except GoatDNAError:  # a damaged config.yaml: not this run, trained again
        return None
    if not same:
        return None
    summary = json.loads(run.summary_json.read_text())
    finished = (
        summary.get("steps") == config.trainer.max_steps
        and summary.get("data_manifest_sha256") == genome.manifest_sha256
    )
    return summary if finished else None


def train_or_keep(
    name: str,
    config: RunConfig,
    genome: ShardedGenome,
    run_dir: Path,
    force: bool,
    say: Callable[[str], None],
) -> None:
    """Train ``config`` into ``run_dir``: kept when finished (`finished_summary`), resumed from
    its last checkpoint when interrupted, else trained from the start (over what is there)."""
    from goatdna.training.trainer import train

    summary = None if force else finished_summary(config, genome, run_dir)
    if summary is not None:
        say(f"  {name}: finished run found in {run_dir} (val loss {summary['val_loss']:.4f}); kept")
        return
    resume = not force and (run_dir / "checkpoints" / "last.ckpt").is_file()
    say(
        f"  {name}: {'resuming' if resume else 'training'} {config.trainer.max_steps} steps "
        f"-> {run_dir}"
    )
    try:
        summary = train(config, genome.root, run_dir, resume=resume, force=not resume)
    except GoatDNAError as err:
        raise GoatDNAError(f"{err}; or rerun `goatdna demo --force` to start over") from None
    say(
        f"  {name}: val loss {summary['val_loss']:.4f} nats/base, "
        f"{summary['tokens_per_s']:,.0f} tokens/s, {summary['wall_seconds']:.0f} s"
    )


def train_demo_runs(
    configs: dict[str, RunConfig],
    genome: ShardedGenome,
    runs_dir: Path,
    force: bool,
    say: Callable[[str], None],
) -> list[Path]:
    """RUNS_DIR/{goat,rope}, each trained or kept (`train_or_keep`); their paths, in order."""
    runs = []
    for name in MODELS:
        train_or_keep(name, configs[name], genome, runs_dir / name, force, say)
        runs.append(runs_dir / name)
    return runs


@dataclass(frozen=True)
class DemoRequest:
    """What `goatdna demo` asks of its first two stages: ``out`` for the shards and runs, the
    synthetic genome's size, each run's config (None: configs/{goat,rope}-tiny.yaml) with
    ``overrides`` and ``steps`` training steps, ``force`` to redo both, torch's CPU threads
    (None: `goatdna.runtime.choose_cpu_threads` decides) for every stage."""

    out: Path
    steps: int
    genome_length: int
    goat_config: Path | None = None
    rope_config: Path | None = None
    overrides: tuple[str, ...] = ()
    force: bool = False
    threads: int | None = None


@dataclass
class DemoStages:
    """A demo under way: its run configs, and when it started and each stage began."""

    request: DemoRequest
    say: Callable[[str], None]
    configs: dict[str, RunConfig]
    started: float
    marks: list[float] = field(default_factory=list)  # each stage's start, then the end

    def prepare_and_train(self) -> tuple[ShardedGenome, list[Path]]:
        """Stages 1 and 2: the shards (`prepare_demo_genome`) and the runs (`train_demo_runs`)."""
        request, say = self.request, self.say
        self.marks.append(time.perf_counter())
        say(
            f"[bold]1/3 prepare[/bold] synthetic genome ({request.genome_length:,} bp) -> "
            f"{request.out / 'shards'}"
        )
        genome = prepare_demo_genome(request.out, request.genome_length, request.force)
        self.marks.append(time.perf_counter())
        say(f"[bold]2/3 train[/bold] tiny GOAT and tiny RoPE ({request.steps} steps each)")
        runs = train_demo_runs(self.configs, genome, request.out / "runs", request.force, say)
        self.marks.append(time.perf_counter())
        return genome, runs

    def done(self, report: Path) -> str:
        """The closing line, once the third stage (``report``'s) has ended: the time taken."""
        self.marks.append(time.perf_counter())
        prepare_s, train_s, report_s = (b - a for a, b in pairwise(self.marks))
        return (
            f"done in {self.marks[-1] - self.started:.0f} s (prepare {prepare_s:.0f} s, train "
            f"{train_s:.0f} s, report {report_s:.0f} s): open {report}"
        )


@contextlib.contextmanager
def demo_stages(request: DemoRequest, say: Callable[[str], None]) -> Iterator[DemoStages]:
    """The demo's setting for every stage, the report's included: ``out`` checked writable
    before any work, the CPU threads chosen (and said) and used, the run configs read."""
    from goatdna.atomic import check_output_dir
    from goatdna.runtime import choose_cpu_threads, using_cpu_threads

    started = time.perf_counter()
    check_output_dir(request.out, "--out")  # before any work: a folder we can write
    choice = choose_cpu_threads(request.threads)  # for every stage, training included
    say(f"torch CPU threads: {choice.reason}")
    with using_cpu_threads(choice):
        configs = demo_configs(
            request.goat_config, request.rope_config, list(request.overrides), request.steps
        )
        yield DemoStages(request, say, configs, started)
