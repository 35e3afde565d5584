#!/usr/bin/env bash
# The CUDA checks behind docs/gpu.md, for a machine where torch sees a GPU: the
# tests' CUDA cases (resume equals an uninterrupted run on the GPU, PPO, expert iteration and
# distillation learn there) and `gcpipe bench train` on the GPU and the CPU of the same machine.
# Run from the repository root with gcpipe importable (pip install -e . or PYTHONPATH) and the
# engine built; logs go to $OUT (default /tmp/gpu). Arguments go to pytest (e.g. -n 4). With
# WHOLE_RUN=1 it also trains the Guerrilla teacher's whole run there (about 7 minutes on an H200).
#   bash benchmarks/gpu.sh
set -u
out=${OUT:-/tmp/gpu}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
gcpipe=(python3 -c 'import sys; from gcpipe.cli import app; sys.argv[0] = "gcpipe"; app()')   # no script needed

{
  nvidia-smi -L
  lscpu | grep -E '^(Model name|CPU\(s\))'
  python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())'
} 2>&1 | tee "$out/machine.log"

# Every CUDA case, and the device tests that hold everywhere.
timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/test_train.py tests/test_expert.py \
  tests/test_distill.py -k "cuda or device" "$@" 2>&1 | tee "$out/tests.log"

# The Guerrilla teacher's settings, sparring bots included (the DAG's longest job), on the GPU.
python3 - <<'PY'
import yaml
config = yaml.safe_load(open("config/config.yaml"))
config["runs"]["guerrilla-teacher"]["device"] = "cuda"
yaml.safe_dump(config, open("/tmp/gpu-config.yaml", "w"))
PY
for args in "--device cpu --threads 2" "--device cuda --threads 2" "--device cpu --threads 16" \
            "--device cuda --threads 16" "--device cuda --threads 16 --envs 8192" \
            "--run guerrilla-teacher --config /tmp/gpu-config.yaml --threads 2 --epochs 3" \
            "--run guerrilla-teacher --config /tmp/gpu-config.yaml --threads 16 --epochs 3"; do
  echo "== gcpipe bench train $args"
  timeout 120 "${gcpipe[@]}" bench train $args
done 2>&1 | tee "$out/bench.log"

if [ "${WHOLE_RUN:-0}" = 1 ]; then
  start=$(date +%s)
  "${gcpipe[@]}" train guerrilla-teacher --config /tmp/gpu-config.yaml --out /tmp/gpu-run \
    --threads "$(nproc)" > "$out/train.log" 2>&1
  echo "rc=$? seconds=$(( $(date +%s) - start ))" | tee -a "$out/train.log"
  cp /tmp/gpu-run/final.bin /tmp/gpu-run/metrics.csv "$out/"    # the checkpoint and its learning curve
fi
