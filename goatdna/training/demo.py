"""`goatdna demo`'s first two stages: a synthetic genome's shards and two tiny runs on them.

prepare (synthetic genome -> OUT/shards) -> train tiny GOAT and tiny RoPE (OUT/runs/{goat,rope}).
Re-running is cheap and safe: prepared shards are reused (`prepare_synthetic`'s own rule), a
finished run is kept when its run directory holds this very run (`RunDir.holds_same_run`, the rule
``train --resume auto`` tells its own run by) trained to its last step on these shards, and an
interrupted run resumes from its last checkpoint. ``force`` redoes both stages.

The third stage (evaluate, GC% study, plots, report; rebuilt only when a checkpoint or an option
changed) is analysis's: `goatdna.analysis.report.report_is_current` and ``build_report``. The
two rooms may not import each other (the import contracts in pyproject.toml), so the command,
`goatdna.cli.demo`, is what joins them; each stage's work and its reuse rule live here and there.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
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
