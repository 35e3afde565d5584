"""Checks the C network step's bits on another architecture against tests/golden/net_step.txt.

    python benchmarks/cross_platform_net.py CC [RUNNER]

compiles benchmarks/net_step_driver.c with csrc/gc_net.c using compiler CC (e.g.
aarch64-linux-gnu-gcc), runs it (through RUNNER, e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu")
on the golden test's weights and observations, and compares every output bit for bit.  Prints the
number of differing outputs (0 = the same bits) and exits 1 if any differ."""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from gcpipe.nn.inference import CompiledNet  # noqa: E402
from test_net_inference import GOLDEN, _hashed_model, _slot_observations  # noqa: E402


def main(cc: str, runner: str = "") -> int:
    net = CompiledNet(_hashed_model(bias=True))
    obs = _slot_observations(8, 2)
    arrays = net._arrays
    with tempfile.TemporaryDirectory() as tmp:
        case, out, exe = Path(tmp) / "case.bin", Path(tmp) / "out.bin", Path(tmp) / "driver"
        with open(case, "wb") as f:
            f.write(np.array([net.hidden, net.layers, obs.shape[1], obs.shape[0]], np.int32).tobytes())
            for name in ["encoder", "encoder_bias"] + [f"gru{i}" for i in range(net.layers)] + ["decoder", "decoder_bias"]:
                f.write(np.ascontiguousarray(arrays[name], np.float32).tobytes())
            f.write(np.ascontiguousarray(obs, np.uint8).tobytes())
        subprocess.run([cc, "-std=c11", "-O3", "-ffp-contract=off", "-I", str(REPO / "csrc"), "-o", str(exe),
                        str(REPO / "benchmarks" / "net_step_driver.c"), str(REPO / "csrc" / "gc_net.c"), "-lm"],
                       check=True)
        run = subprocess.run([*runner.split(), str(exe), str(case), str(out)], check=True, capture_output=True,
                             text=True)
        got = np.fromfile(out, np.float32)
    expected = np.array([float.fromhex(v) for v in GOLDEN.read_text().split()], np.float32)
    differing = int(np.count_nonzero(got.view(np.uint32) != expected.view(np.uint32)))
    print(f"{run.stdout.strip()}; {got.size} outputs, {differing} differ from {GOLDEN.name}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
