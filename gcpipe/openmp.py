"""How long torch's idle OpenMP threads spin before they sleep.

gcpipe runs C kernels on threads of its own between torch's parallel operations (the update's
MinGRU layers, the environment step with its sparring bots' searches, the rollout's C network
step: each splits its rows or environments over the training's threads).
After each parallel operation libgomp, torch's OpenMP runtime, keeps its idle threads spinning for
GOMP_SPINCOUNT iterations (300,000 by default on a machine with a thread per core) in case more
work follows, so on a 2-core machine the C kernel's second thread shares its core with a spinning
one for several milliseconds: measured there, a torch operation followed by the rollout's C step
took 13.7 ms against 1.1 + 7.8 ms apart (README, Speed).  A spin count of 10,000 leaves torch's
own back-to-back operations their spin and frees the core soon after.  libgomp reads the variable
once, when torch loads it, so it is set before anything imports torch; it changes no value."""
import os

SPIN_COUNT = "10000"


def short_spin() -> None:
    """Sets this process's GOMP_SPINCOUNT unless the user set it or OMP_WAIT_POLICY; effective
    only where torch is not imported yet (the CLI calls it at import)."""
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
