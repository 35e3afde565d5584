"""Training's bytes on this machine under settings that play what differs between CPUs (docs/reproducibility.md).

    python benchmarks/cross_platform_train.py [--bfloat16]

Trains one short PPO run (512 self-play envs, horizon 64, 3 epochs, seed 7, two threads) in a fresh
process per setting and prints the SHA-256 prefix of its final.bin, torch's CPU capability and the
seconds it took. `default` is the CLI's settings (torch's AVX2 kernels, MKL's COMPATIBLE branch);
the others change one thing: MKL's own choice of kernels, its AVX2 branch, its AVX2 instructions
(MKL picks by vendor and model; the products no longer use it, so the hash must not move),
gcpipe's AVX2 code path on an AVX-512 CPU (an AVX2-only CPU's path), and torch's AVX-512 kernels
(another file: the reason the CLI pins AVX2).

Measured 2026-12-04 on an AMD EPYC (Zen 4, AVX-512), torch 2.13.0, commit 41ae572: 067d041c... for
every setting but torch-avx512 (c59a00c4..., another file, as it should be).  Commit 84f302c (the
MinGRU gates' sigmoids and the policy's softmax in C): 725db51b... for every setting, torch-avx512
included. Before the products
were in C (commit 4f527c3) the settings default / ATEN avx2 + MKL_CBWR=AVX2 / ATEN avx2 +
MKL_CBWR=COMPATIBLE gave three hashes, f1592db5..., 849da7fb..., f6d3045d...

`--bfloat16` runs it with `update_precision: bfloat16` by AVX512_BF16's instruction (where the
CPU has it) and by its emulation on the AVX-512 and AVX2 paths (GCPIPE_BF16=emulate): one hash,
81260f82... on the same Zen 4 (2026-12-05)."""
import os
import subprocess
import sys

SETTINGS = {
    "default": {},
    "mkl-auto": {"MKL_CBWR": "AUTO"},
    "mkl-avx2": {"MKL_CBWR": "AVX2"},
    "mkl-avx2-isa": {"MKL_CBWR": "AUTO", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "gemm-avx2": {"GCPIPE_SIMD": "avx2"},
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
                          checkpoint_interval=100, seed=7, update_precision="PRECISION"))
start = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    out = train("x", config, pathlib.Path(tmp) / "x", echo=lambda line: None)
    digest = hashlib.sha256((out / "final.bin").read_bytes()).hexdigest()
print(digest[:16], torch.backends.cpu.get_cpu_capability(), f"{time.perf_counter() - start:.1f} s")
"""


# With --bfloat16 (`update_precision: bfloat16`): AVX512_BF16's instruction where the CPU has it
# and its emulation on gcpipe's AVX-512 and AVX2 paths, which must give one hash.
BFLOAT16_SETTINGS = {
    "bf16": {},
    "bf16-emulated": {"GCPIPE_BF16": "emulate"},
    "bf16-emulated-avx2": {"GCPIPE_BF16": "emulate", "GCPIPE_SIMD": "avx2"},
}


def main(argv: list[str]) -> int:
    if argv not in ([], ["--bfloat16"]):
        print("usage: python benchmarks/cross_platform_train.py [--bfloat16]", file=sys.stderr)
        return 2
    settings, precision = (BFLOAT16_SETTINGS, "bfloat16") if argv else (SETTINGS, "float32")
    chosen = set().union(*SETTINGS.values(), *BFLOAT16_SETTINGS.values())   # a setting's variables alone
    for name, variables in settings.items():
        env = {key: value for key, value in os.environ.items() if key not in chosen}
        env.update(variables)
        result = subprocess.run([sys.executable, "-c", RUN.replace("PRECISION", precision)], env=env,
                                capture_output=True, text=True)
        if result.returncode != 0:
            print(f"{name}: failed: {(result.stderr.strip().splitlines() or ['no output'])[-1]}")
            return 1
        print(f"{name:>10}: {result.stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
