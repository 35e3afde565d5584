"""bfloat16 products for training, measured before they are built (docs/speed.md; toward 200 k
agent-steps/s in `gcpipe bench train`).

    python benchmarks/bf16_products.py [CC]

compiles benchmarks/bf16_products.c (default compiler cc) and runs it: whether this CPU's
AVX512_BF16 dot product is the float32 emulation the C file states (odd pair element first, one
fused multiply-add each, DAZ/FTZ), bit for bit over a million crafted pairs and a whole product,
and one thread's GFLOP/s with it against float32 FMA at the update's forward shape.  Exits 1 if a
bit differs; on a CPU without AVX512_BF16 it says so and exits 0."""
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().with_suffix(".c")


def main(cc: str = "cc") -> int:
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "bf16_products"
        subprocess.run([cc, "-std=gnu11", "-O3", "-ffp-contract=off", "-o", str(exe), str(SOURCE), "-lm"], check=True)
        return subprocess.run([str(exe)]).returncode


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
