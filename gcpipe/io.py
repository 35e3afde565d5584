"""File helpers: atomic writes (every derived output is written to a temp file and renamed into
place, so a reader, or a killed job that Snakemake restarts, never sees a half-written file),
the text formats of outputs (canonical JSON, CSV, Markdown tables) and file digests."""
import csv
import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

# mkstemp creates files readable by the owner only; outputs should get the usual permissions.
# Reading the umask means setting it, so do it once at import rather than per write.
_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path, data: bytes) -> None:
    """Write `data` to `path` via a temp file in the same folder, fsync, then os.replace."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temp file must live in the target folder: os.replace is only atomic within a filesystem.
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def atomic_write_text(path, text: str) -> None:
    """Write UTF-8 `text` atomically (no newline translation, so bytes are the same everywhere)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def json_text(obj) -> str:
    """The canonical JSON file text of gcpipe: 2-space indent, key order as given, final newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def atomic_write_json(path, obj) -> None:
    """Write `obj` as canonical JSON (see json_text) atomically."""
    atomic_write_text(path, json_text(obj))


def csv_text(rows) -> str:
    """CSV text of rows (the first one the header), "\n" line ends, so bytes are the same everywhere."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def markdown_table(header, rows, right_from: int = 1) -> str:
    """A Markdown table; columns from `right_from` on are right-aligned (numbers)."""
    rule = ["---" if k < right_from else "---:" for k in range(len(header))]
    return "".join("| " + " | ".join(map(str, row)) + " |\n" for row in [header, rule, *rows])


def sha256_file(path) -> str:
    """The SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
