"""Settings torch reads once, when it loads or first dispatches a kernel: set before anything
imports torch (the CLI calls `before_torch` at import; where torch is already loaded they are
left alone, so that child processes run what their parent runs).  A user's own value of any of
them is kept.

GOMP_SPINCOUNT: how long torch's idle OpenMP threads spin before they sleep.  gcpipe runs C
kernels on threads of its own between torch's parallel operations (the update's products and
MinGRU layers, the environment step with its sparring bots' searches, the rollout's C network
step: each splits its rows or environments over the training's threads).  After each parallel
operation libgomp, torch's OpenMP runtime, keeps its idle threads spinning for GOMP_SPINCOUNT
iterations (300,000 by default on a machine with a thread per core) in case more work follows,
so on a 2-core machine the C kernel's second thread shares its core with a spinning one for
several milliseconds: measured there, a torch operation followed by the rollout's C step took
13.7 ms against 1.1 + 7.8 ms apart (docs/experiments.md).  A spin count of 1,000 leaves torch's own
back-to-back operations their spin and frees the core soon after: at 10,000 a kernel's second
thread still started 0.1-0.2 ms late after a torch operation (70 ms of a 1.45 s PPO epoch in
such late starts; 23 ms at 1,000), and at 300 torch's operations slowed.  It changes no value.

ATEN_CPU_CAPABILITY: which of its compiled kernel sets torch runs, by default the widest the CPU
has (AVX-512 on recent Intel and AMD CPUs, AVX2 on older ones).  Its vectorised reductions (the
softmax's sums, norms, means) add in lanes of the vector width, so a training run gave other bytes
under the AVX-512 kernels than under the AVX2 ones.  Pinned to avx2 wherever the CPU has AVX2 and
FMA (every x86-64 CPU since 2013-15), the same kernels run on every such machine.

MKL_CBWR: torch's exp and log of a float tensor are MKL's vector-math functions, whose code
MKL picks by CPU vendor and model, as it picks its matrix kernels; its COMPATIBLE branch is the
one Intel documents as giving the same results on every x86-64 CPU, Intel's and others'.  (The
training's matrix products are gcpipe's own, gcpipe/train/matmul.py, so it does not slow them.)

With the three, a training run is the same bytes on every x86-64 CPU with AVX2
(docs/reproducibility.md).  Measured on a Zen 4 EPYC: no change in `gcpipe bench train`'s speed."""
import contextlib
import os
import sys

SPIN_COUNT = "1000"
# More threads than any machine has cores: torch's set_num_threads crashes (a segfault) far above it.
MAX_THREADS = 1024


@contextlib.contextmanager
def torch_threads(threads: int):
    """torch (and the C kernels that split their rows over torch's thread count) on `threads`
    threads for the block, restored afterwards; nothing to do where nothing has loaded torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def set_threads(threads, flag: str = "--threads") -> None:
    """torch.set_num_threads(threads) after checking it: an integer in 1..MAX_THREADS."""
    from gcpipe.errors import check_int
    check_int(flag, threads, 1, MAX_THREADS)
    import torch
    torch.set_num_threads(int(threads))


def short_spin() -> None:
    """Sets this process's GOMP_SPINCOUNT unless the user set it or OMP_WAIT_POLICY."""
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux lists them (empty elsewhere: nothing is pinned there)."""
    try:
        with open("/proc/cpuinfo") as info:
            return next((set(line.split(":", 1)[1].split()) for line in info if line.startswith("flags")), set())
    except OSError:
        return set()


def portable_kernels() -> None:
    """Sets ATEN_CPU_CAPABILITY=avx2 where the CPU has AVX2 and FMA, and MKL_CBWR=COMPATIBLE,
    each unless the user set it."""
    if "ATEN_CPU_CAPABILITY" not in os.environ and {"avx2", "fma"} <= cpu_flags():
        os.environ["ATEN_CPU_CAPABILITY"] = "avx2"
    os.environ.setdefault("MKL_CBWR", "COMPATIBLE")


def before_torch() -> None:
    """All three settings, unless torch is loaded already (it has read them then)."""
    if "torch" in sys.modules:
        return
    short_spin()
    portable_kernels()
