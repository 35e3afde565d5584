"""The child processes of a running command, as the kernel lists them (its workers)."""
from pathlib import Path


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
