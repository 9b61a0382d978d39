#!/usr/bin/env bash
# The first GPU run, prepared as one command (see benchmarks/README.md, "gpu_check"):
#
#   bash benchmarks/gpu_check.sh                # on a machine with one CUDA GPU: at most 8 minutes
#   bash benchmarks/gpu_check.sh --cpu-dry-run  # the same steps, tiny configs, on a CPU (CI)
#
# Runs from a plain checkout (the repository root goes on PYTHONPATH; nothing is installed):
#   1. prints the environment (nvidia-smi, python, torch, CUDA, flash-attn, Lightning Fabric)
#   2. gpu_bench.py eager at seq_len 1024 and 2048 (125M GOAT vs RoPE, alternating blocks)
#   3. prepares synthetic shards there, trains the 125M GOAT and RoPE configs for 60 steps each
#      through the real CLI (`goatdna train`, bf16-mixed) and reports tokens/s, MFU and peak CUDA
#      memory from each run's summary.json
#   4. evaluates both at 1x and 4x the training length (`goatdna evaluate`)
#   5. generates with the KV cache (`goatdna generate`)
#   5b. checks GOAT's precision path against a float64 CPU reference (`goatdna check-precision`:
#      bf16-mixed and the default attention backend, flash-attn when installed; exit 1 = failed)
#   5c. counts the ops and CUDA kernels of one 125M GOAT and RoPE training step (kernel_count.py)
#   6. if time remains, gpu_bench.py --compile at seq_len 1024
# and copies every result file (not the 1.5 GB checkpoints) into $OUT (default:
# benchmarks/results/gpu_check-<gpu|cpu-dry-run>), ending with gpu_check.md, the summary table.
# A failed step is logged and the others still run; the exit status is 1 if any step failed or
# an expected file is missing. Every step is bounded by a deadline 8 minutes after the start.
#
# pyfaidx (only `goatdna prepare` needs it) may be missing where only torch is installed: when it cannot be
# imported, a pure-Python wheel in .whl/ (pip download --no-deps -d .whl "pyfaidx>=0.9.1,<0.10")
# is imported straight from its zip file; keep .whl in the checkout.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
MODE=gpu
if [[ "${1:-}" == "--cpu-dry-run" ]]; then
  MODE=cpu
elif [[ $# -gt 0 ]]; then
  echo "error: unknown argument $1 (usage: bash benchmarks/gpu_check.sh [--cpu-dry-run])" >&2
  exit 2
fi
# 8 minutes on the GPU; the CPU dry run on a busy 2-core CI machine gets 20
LIMIT_S=${GPU_CHECK_LIMIT_S:-$([[ $MODE == cpu ]] && echo 1200 || echo 480)}
START=$SECONDS
DEADLINE=$((START + LIMIT_S - 10))
OUT="${OUT:-$REPO/benchmarks/results/gpu_check-$([[ $MODE == cpu ]] && echo cpu-dry-run || echo gpu)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import pyfaidx" 2>/dev/null; then
  for wheel in "$REPO"/.whl/pyfaidx-*.whl; do
    [[ -f "$wheel" ]] && export PYTHONPATH="$wheel:$PYTHONPATH"
  done
fi
export PYTHONUNBUFFERED=1
GOATDNA=(python3 -m goatdna.cli.app)
FAILED=()

log() { echo "[gpu_check +$((SECONDS - START))s] $*" | tee -a "$OUT/gpu_check.log"; }

# step NAME CAP_SECONDS COMMAND...: run with a timeout of min(CAP, time to the deadline), output to
# $OUT/NAME.log and the console; a failure is recorded and the script goes on
step() {
  local name=$1 cap=$2
  shift 2
  local left=$((DEADLINE - SECONDS))
  local limit=$((cap < left ? cap : left))
  if ((limit < 5)); then
    log "$name: SKIPPED (no time left before the 8-minute deadline)"
    FAILED+=("$name (skipped: no time)")
    return 1
  fi
  log "$name: start (limit ${limit}s)"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > >(tee "$OUT/$name.log") 2>&1
  local rc=$?
  wait
  echo "$name $((SECONDS - t0))" >> "$OUT/step_seconds.txt"
  if ((rc != 0)); then
    log "$name: FAILED (exit $rc after $((SECONDS - t0))s; see $name.log)"
    FAILED+=("$name (exit $rc)")
    return 1
  fi
  log "$name: ok ($((SECONDS - t0))s)"
}

if [[ $MODE == gpu ]]; then
  SIZE=125m
  BENCH=(python3 benchmarks/gpu_bench.py --out "$OUT")
  SEQ=1024
  TRAIN=(--max-steps 60 --accelerator gpu --devices 1 --precision bf16-mixed
    --set trainer.accumulate=2 --set optim.warmup_steps=10 --set trainer.throughput_warmup=10
    --set data.val_max_windows=256 --set data.num_workers=2)
  GENOME=16000000
  ACCELERATOR=gpu
  NEW_TOKENS=1000
  CAP_BENCH=170 CAP_TRAIN=110 CAP_EVAL=45 CAP_GEN=30 CAP_CHECK=60
  CHECK=(--precision bf16-mixed --attention auto --windows 2 --length 512)
else
  SIZE=tiny
  BENCH=(python3 benchmarks/gpu_bench.py --out "$OUT" --cpu-smoke)
  SEQ=32
  TRAIN=(--max-steps 4 --accelerator cpu --devices 1 --precision 32-true
    --set model.n_layers=1 --set model.d_model=32 --set model.n_heads=2 --set model.mlp_hidden=64
    --set model.goat_modes=2 --set data.seq_len=$SEQ
    --set data.micro_batch_size=4 --set data.val_max_windows=8 --set optim.warmup_steps=2
    --set trainer.throughput_warmup=1)
  GENOME=400000
  ACCELERATOR=cpu
  NEW_TOKENS=32
  CAP_BENCH=400 CAP_TRAIN=300 CAP_EVAL=200 CAP_GEN=200 CAP_CHECK=200
  CHECK=(--precision bf16-mixed --attention auto --windows 2 --length "$SEQ")
fi
TRAIN+=(--set trainer.eval_every=1000 --set trainer.ckpt_every=1000 --set trainer.log_every=10
  --set trainer.progress_bar=false --set trainer.tensorboard=false)

# 1. environment --------------------------------------------------------------------------------
log "mode $MODE, results in $OUT, work in $WORK"
{
  command -v nvidia-smi > /dev/null && nvidia-smi
  python3 - << 'EOF'
import importlib, platform, sys
import torch
print("python", sys.version.split()[0], platform.platform())
print("torch", torch.__version__, "CUDA", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("gpu", torch.cuda.get_device_name(), "bf16", torch.cuda.is_bf16_supported())
for name in ("flash_attn", "lightning_fabric", "pytorch_lightning", "numpy", "pyfaidx", "Bio", "yaml", "typer", "rich"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "installed"), module.__file__)
    except ImportError as err:
        print(name, "NOT importable:", err)
EOF
} 2>&1 | tee "$OUT/environment.txt"

# 2. eager benchmark at 1024 and 2048 -----------------------------------------------------------
if [[ $MODE == gpu ]]; then
  step bench_eager "$CAP_BENCH" "${BENCH[@]}" --seq-lens 1024,2048
else
  step bench_eager "$CAP_BENCH" "${BENCH[@]}" --seq-lens 32,64
fi

# 3. shards, then 60 steps of each model through the CLI ------------------------------------------
step prepare 60 "${GOATDNA[@]}" prepare --synthetic --synthetic-length "$GENOME" \
  --out "$WORK/shards"
PROMPT=$(python3 -c "import random; r = random.Random(0); print(''.join(r.choice('ACGT') for _ in range(200)))")
# a small random-base FASTA for the precision check (its windows and centre SNVs)
python3 -c "
import random, sys
r = random.Random(1)
with open(sys.argv[1], 'w') as fh:
    for name in ('chrP1', 'chrP2'):
        seq = ''.join(r.choice('ACGT') for _ in range(20000))
        fh.write('>' + name + '\\n' + ''.join(seq[i:i + 60] + '\\n' for i in range(0, len(seq), 60)))
" "$WORK/precision_ref.fa"
for scheme in goat rope; do
  run="$WORK/runs/$scheme"
  step "train_$scheme" "$CAP_TRAIN" "${GOATDNA[@]}" train --config "configs/$scheme-$SIZE.yaml" \
    --data "$WORK/shards" --out "$run" "${TRAIN[@]}"
  mkdir -p "$OUT/train_$scheme"
  for f in config.yaml metrics.csv summary.json; do
    [[ -f "$run/$f" ]] && cp "$run/$f" "$OUT/train_$scheme/"
  done
  # 4. evaluation at 1x and 4x the training length ----------------------------------------------
  step "evaluate_$scheme" "$CAP_EVAL" "${GOATDNA[@]}" evaluate \
    --checkpoint "$run/checkpoints/last.ckpt" --data "$WORK/shards" \
    --context-lengths "$SEQ,$((4 * SEQ))" --max-eval-tokens $((64 * SEQ)) \
    --out "$OUT/evaluate_$scheme" --accelerator "$ACCELERATOR" --devices 1
  # 5. KV-cached generation ---------------------------------------------------------------------
  step "generate_$scheme" "$CAP_GEN" "${GOATDNA[@]}" generate \
    --checkpoint "$run/checkpoints/last.ckpt" --prompt "$PROMPT" \
    --max-new-tokens "$NEW_TOKENS" --num-samples 8 --seed 0 \
    --out "$OUT/generate_$scheme.json" --accelerator "$ACCELERATOR" --devices 1
  # 5b. precision check (GOAT: its prior has its own bf16 numerics) -------------------------------
  if [[ $scheme == goat ]]; then
    step check_precision_goat "$CAP_CHECK" "${GOATDNA[@]}" check-precision \
      --checkpoint "$run/checkpoints/last.ckpt" --fasta "$WORK/precision_ref.fa" "${CHECK[@]}" \
      --out "$OUT/check_precision_goat.json" --accelerator "$ACCELERATOR" --devices 1
  fi
done

# 5c. kernel launches per training step (benchmarks/kernel_count.py; ~20 s) ---------------------
if [[ $MODE == gpu ]]; then
  step kernel_count 60 python3 benchmarks/kernel_count.py --device cuda --out "$OUT"
else
  step kernel_count 120 python3 benchmarks/kernel_count.py --size tiny --out "$OUT"
fi

# 6. torch.compile at 1024, if time remains -------------------------------------------------------
if [[ $MODE == gpu ]]; then
  if ((DEADLINE - SECONDS > 120)); then
    # optional: a compile that does not finish before the deadline does not fail the check
    if ! step bench_compile 400 "${BENCH[@]}" --compile --seq-lens 1024 --repeats 2; then
      unset 'FAILED[-1]'
      log "bench_compile is optional: not counted as a failure"
    fi
  else
    log "bench_compile: skipped (less than 2 minutes left)"
  fi
else
  step bench_compile 400 "${BENCH[@]}" --compile --compile-backend eager --seq-lens 32
fi

# summary ---------------------------------------------------------------------------------------
python3 - "$OUT" "$MODE" << 'EOF' | tee "$OUT/gpu_check.md"
import json, sys
from pathlib import Path

out, mode = Path(sys.argv[1]), sys.argv[2]
print(f"# gpu_check ({mode})\n")
env = (out / "environment.txt").read_text().strip().splitlines()
print("```\n" + "\n".join(l for l in env if not l.startswith(("|", "+"))) + "\n```\n")
print("| model | steps | tokens/s | MFU | peak memory GiB | precision | device | val loss |")
print("| --- | ---: | ---: | ---: | ---: | --- | --- | ---: |")
for scheme in ("goat", "rope"):
    path = out / f"train_{scheme}" / "summary.json"
    if not path.is_file():
        print(f"| {scheme} | no summary.json (training failed) | | | | | | |")
        continue
    s = json.loads(path.read_text())
    mfu = "n/a" if s["mfu"] is None else f"{s['mfu']:.3f}"  # null: see s["mfu_note"]
    print(f"| {scheme} | {s['steps']} | {s['tokens_per_s']:,.0f} | {mfu} | "
          f"{s['peak_memory_bytes'] / 2**30:.2f} | {s['precision']} | {s['device']} | "
          f"{s['val_loss']:.4f} |")
print("\n| model | context | bits/base |")
print("| --- | ---: | ---: |")
for scheme in ("goat", "rope"):
    path = out / f"evaluate_{scheme}" / "evaluation.json"
    if path.is_file():
        for r in json.loads(path.read_text()).get("results", []):
            print(f"| {scheme} | {r['context_length']} | {r['bits_per_base']:.4f} |")
check = out / "check_precision_goat.json"
if check.is_file():
    c = json.loads(check.read_text())
    t = c["thresholds"]
    print("\n| precision check | attention | NLL diff (<= {}) | max log-prob error (<= {}) | "
          "LLR Spearman (>= {}) | verdict |".format(t["max_nll_diff"], t["max_logprob_error"],
                                                    t["min_spearman"]))
    print("| --- | --- | ---: | ---: | ---: | --- |")
    print(f"| goat {c['precision']} on {c['device']} | {c['attention']} | "
          f"{max(c['nll_diff'], c['max_window_nll_diff']):.2e} | {c['max_logprob_error']:.3g} | "
          f"{c['spearman']:.4f} | {'PASS' if c['passed'] else 'FAIL'} |")
kernels = out / "kernel_count.md"
if kernels.is_file():
    print("\n" + kernels.read_text().strip())
steps = dict(line.split() for line in (out / "step_seconds.txt").read_text().splitlines())
print("\nstep seconds: " + ", ".join(f"{k} {v}" for k, v in steps.items()))
for md in sorted(out.glob("gpu_bench-*.md")):
    print(f"\n## {md.name}\n\n{md.read_text()}")
EOF

# every file the run must leave ---------------------------------------------------------------------
expected=(environment.txt gpu_check.log gpu_check.md step_seconds.txt bench_eager.log prepare.log
  check_precision_goat.json kernel_count.md kernel_count.json)
for scheme in goat rope; do
  expected+=("train_$scheme.log" "train_$scheme/summary.json" "train_$scheme/metrics.csv"
    "train_$scheme/config.yaml" "evaluate_$scheme/evaluation.json" "evaluate_$scheme/evaluation.csv"
    "generate_$scheme.json")
done
shopt -s nullglob
benches=("$OUT"/gpu_bench-*[0-9].json)
((${#benches[@]} > 0)) || FAILED+=("missing gpu_bench-*.json")
for f in "${expected[@]}"; do
  [[ -s "$OUT/$f" ]] || FAILED+=("missing $f")
done
(cd "$OUT" && find . -type f | sort > files.txt)
log "done in $((SECONDS - START))s; $(wc -l < "$OUT/files.txt") files in $OUT"
if ((${#FAILED[@]} > 0)); then
  log "FAILED: ${FAILED[*]}"
  exit 1
fi
log "all steps passed"
