"""Training's bytes on this machine under torch's and MKL's code-path settings, to compare across
CPUs (README, "Same games on any machine": training is not yet byte-identical across CPUs).

    python benchmarks/cross_platform_train.py

Trains one short PPO run (512 self-play envs, horizon 64, 3 epochs, seed 7, two threads) in a fresh
process per setting and prints the SHA-256 prefix of its final.bin, torch's CPU capability and the
seconds it took. Settings: torch's and MKL's own choice; torch's AVX2 kernels with MKL's AVX2 branch
in its reproducible (CNR) mode, which Intel documents for Intel CPUs only; and torch's AVX2 kernels
with MKL's COMPATIBLE branch (SSE2, the one CNR branch documented for every vendor). A setting whose
hash is the same on two CPUs makes training byte-identical across them there.

Measured 2026-12-04 on an AMD EPYC (Zen 4, AVX-512), torch 2.13.0: f1592db5..., 849da7fb...,
f6d3045d... (`gcpipe bench train` there, interleaved rounds: 77-104 k, 77-86 k and 43-63 k agent
steps/s)."""
import os
import subprocess
import sys

SETTINGS = {
    "default": {},
    "mkl-compatible": {"MKL_CBWR": "COMPATIBLE"},
    "mkl-avx2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "gemm-avx2": {"GCPIPE_SIMD": "avx2"},
    "torch-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "torch-avx512": {"ATEN_CPU_CAPABILITY": "avx512"},
}

RUN = """
import hashlib, pathlib, tempfile, time
from gcpipe.torch_env import before_torch
before_torch()   # as the CLI does, before torch loads
import torch
from gcpipe.train.config import make_config
from gcpipe.train.run import train
torch.set_num_threads(2)
config = make_config(dict(num_envs=512, horizon=64, minibatch_size=8192, total_timesteps=512 * 2 * 64 * 3,
                          checkpoint_interval=100, seed=7))
start = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    out = train("x", config, pathlib.Path(tmp) / "x", echo=lambda line: None)
    digest = hashlib.sha256((out / "final.bin").read_bytes()).hexdigest()
print(digest[:16], torch.backends.cpu.get_cpu_capability(), f"{time.perf_counter() - start:.1f} s")
"""


def main() -> int:
    chosen = set().union(*SETTINGS.values())     # a setting's variables alone, none from the caller
    for name, variables in SETTINGS.items():
        env = {key: value for key, value in os.environ.items() if key not in chosen}
        env.update(variables)
        result = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            print(f"{name}: failed: {(result.stderr.strip().splitlines() or ['no output'])[-1]}")
            return 1
        print(f"{name:>10}: {result.stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
