"""File helpers: atomic writes (every derived output is written to a temp file and renamed into
place, so a reader, or a killed job that Snakemake restarts, never sees a half-written file),
the text formats of outputs (canonical JSON, CSV, Markdown tables), file digests and checksum
sidecars, and the one-writer locks of ledgers and run folders."""
import contextlib
import csv
import errno
import fcntl
import hashlib
import io
import json
import os
import stat
import tempfile
from pathlib import Path

from gcpipe import paths
from gcpipe.errors import UserError

# mkstemp creates files readable by the owner only; outputs should get the usual permissions.
# Reading the umask means setting it, so do it once at import rather than per write.
_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path, data: bytes) -> None:
    """Write `data` to `path` via a temp file in the same folder, fsync, then os.replace."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    check_output_file(path)
    make_folder(path.parent)
    # The temp file must live in the target folder: os.replace is only atomic within a filesystem.
    with naming(path, instead_of=path.parent):   # not the temp file's random name: ENOSPC for want of inodes
        fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=_TEMP_SUFFIX)
    try:
        with naming(path):
            os.fchmod(fd, 0o666 & ~_UMASK)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def make_folder(folder: Path) -> None:
    """`folder` and its parents, created where missing; one that is a file is a UserError (mkdir's
    own line, "FOLDER: File exists", read as if the output were there already)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"{folder} is a file (or a broken link), not a folder; give a folder there") from None


@contextlib.contextmanager
def naming(path, instead_of=None):
    """An OSError raised inside without a file name (a write's or an fsync's: "No space left on
    device"), or naming a file in folder `instead_of`, gets `path`, so the one-line error says
    which file could not be written."""
    try:
        yield
    except OSError as error:
        in_folder = (instead_of is not None and error.filename is not None   # (mkstemp's names are absolute)
                     and os.path.dirname(os.path.abspath(error.filename)) == os.path.abspath(instead_of))
        if error.filename is None or in_folder:
            error.filename = str(path)
        raise


STDOUT = "standard output"   # what an error of writing sys.stdout names (NamedStream)


class NamedStream:
    """A text stream (sys.stdout) whose failed writes name it, as `naming` names files: a command
    whose stdout is a full disk (`gcpipe elo ... > table.md`) then says which file it could not write."""

    def __init__(self, stream, name: str):
        self._stream, self._name = stream, name

    def write(self, text: str) -> int:
        with naming(self._name):
            return self._stream.write(text)

    def flush(self) -> None:
        with naming(self._name):
            self._stream.flush()

    def __getattr__(self, attribute):
        return getattr(self._stream, attribute)


_TEMP_SUFFIX = ".tmp"


def _temp_prefix(path: Path) -> str:
    """The start of the name of a temp file an atomic write of `path` makes (mkstemp adds 8
    random characters, then _TEMP_SUFFIX)."""
    return f".{path.name}."


def check_output_file(path) -> None:
    """OSError naming `path` when no file can be written there: a FIFO, device or socket is there (a
    FIFO would block the open, /dev/null would take the bytes and lose them, and an atomic write's
    rename would replace the node itself), or its name, or the name of the temp file an atomic write
    of it makes (8 random characters longer), exceeds its filesystem's limit.  Commands check the
    files they will write with this before the work whose results they hold."""
    path = Path(path)
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):   # the write will name those
        _refuse_special_file(os.stat(path).st_mode, path)
    folder = next((p for p in (path.parent, *path.parent.parents) if p.exists()), Path("."))
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = paths.NAME_MAX
    if len(os.fsencode(_temp_prefix(path) + _TEMP_SUFFIX)) + 8 > limit:
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), str(path))


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


def special_file_kind(mode: int) -> str | None:
    """What a path of `os.stat` mode `mode` is when it is neither a regular file nor a folder:
    "a FIFO", "a device", "a socket"; None for a file or folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"


def _refuse_special_file(mode: int, path) -> None:
    """OSError when `mode` is a FIFO's, device's or socket's, for the caller to report with the path."""
    if kind := special_file_kind(mode):
        raise OSError(errno.EINVAL, f"{kind}, not a regular file", str(path))


def open_regular_file(path, mode: str = "rb", encoding: str | None = None):
    """`path` opened for reading ("rb" or "r"), which must be a regular file: a FIFO would block
    until a writer came and a device (/dev/zero) would never end, so either raises OSError, as a
    missing file does, for the caller to report with the path."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)   # a FIFO's open would block
    except OSError as error:
        if error.errno == errno.ENXIO:   # a socket cannot be opened: say what it is
            _refuse_special_file(os.stat(path).st_mode, path)
        raise
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISDIR(kind):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        _refuse_special_file(kind, path)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, mode, encoding=encoding)


def read_bytes(path) -> bytes:
    """The bytes of the regular file `path` (open_regular_file)."""
    with open_regular_file(path) as handle:
        return handle.read()


def read_text(path) -> str:
    """The UTF-8 text of the regular file `path` (open_regular_file), newlines as Path.read_text
    gives them."""
    with open_regular_file(path, "r", "utf-8") as handle:
        return handle.read()


def sha256_file(path) -> str:
    """The SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open_regular_file(path) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- checksums ---------------------------------------------------------------------------------
# Every training state and checkpoint gcpipe writes gets a sidecar PATH.sha256 in `sha256sum`
# format (checkpoint files themselves stay raw floats, byte-compatible with the reference), so
# a file damaged on disk is caught when it is read instead of loading silently.

def checksum_path(path) -> Path:
    """The sidecar holding the SHA-256 of `path`: PATH.sha256."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def write_checked(path, data: bytes) -> None:
    """Write `data` to `path` atomically, then its SHA-256 sidecar.  A kill between the two leaves
    a file that fails verification (never one that passes with the wrong bytes)."""
    path = Path(path)
    atomic_write_bytes(path, data)
    atomic_write_text(checksum_path(path), f"{hashlib.sha256(data).hexdigest()}  {path.name}\n")


def checksum_problem(path, data: bytes | None = None) -> str | None:
    """Why `path` (or `data`, its bytes already read) does not match its sidecar, or None when it
    does.  A missing sidecar is a problem: call this only for files written by write_checked."""
    path = Path(path)
    try:
        recorded = read_text(checksum_path(path)).split()[0]
    except (OSError, UnicodeDecodeError, IndexError):
        return f"its checksum file {checksum_path(path).name} is missing or unreadable"
    try:
        actual = hashlib.sha256(read_bytes(path) if data is None else data).hexdigest()
    except OSError as error:
        return f"it cannot be read ({error.strerror})"
    if actual != recorded:
        return f"its bytes do not match {checksum_path(path).name} (damaged or cut short)"
    return None


def keep_previous(path, previous) -> None:
    """Copy `path` and its sidecar to `previous` (and its sidecar) when `path` verifies, so a kill
    or a damaged disk while `path` is being replaced still leaves one good copy."""
    path = Path(path)
    try:
        data = read_bytes(path)
    except FileNotFoundError:
        return
    if checksum_problem(path, data) is None:
        write_checked(previous, data)


def remove_stale_temps(folder, name: str = "*") -> None:
    """Remove the temp files that killed atomic writes of `name` (default: of every file) left in
    `folder`.  Only for files whose writer holds the lock of them: another writer's temp is live."""
    for temp in Path(folder).glob(f"{_temp_prefix(Path(name))}*{_TEMP_SUFFIX}"):
        temp.unlink(missing_ok=True)


# -- locks -------------------------------------------------------------------------------------
# One writer per ledger and per training run folder: an exclusive flock held for the writer's
# life.  The kernel drops it when the holder dies (kill -9 included), so a stale lock cannot
# block a rerun; the workers a holder forks share it.

def lock_or_refuse(fd: int, path, what: str) -> None:
    """Take an exclusive lock on the open file (or folder) `fd` of `path`, or raise a UserError
    naming the process that holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise UserError(f"{what} {path} is being written by {_writer(path)}; wait for it to finish or stop it "
                        f"(two writers would mix their results)") from None


def _writer(path) -> str:
    """Who holds the lock of `path`, for an error line: 'process PID', or 'another process'."""
    holder = _lock_holder(path)
    return f"process {holder}" if holder else "another process"


def refuse_while_written(path, what: str) -> None:
    """A UserError naming the writer when a writer holds the lock of the file `path` (its contents
    are not final: a reader would take a part for the whole).  Tested with a shared lock that is
    released at once, so a reader never blocks or refuses a writer; a writer that starts after
    the test adds lines that the reader may or may not see.  Anything but a regular file that can
    be opened passes (the reader's own checks say why; opening a FIFO would wait for a writer)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise UserError(f"{what} {path} is being written by {_writer(path)}; wait for it to finish (its games are "
                        f"not all played yet)") from None
    finally:
        os.close(fd)


def open_locked_file(path, what: str):
    """`path` opened for appending (created, with its folder, if needed) and locked (lock_or_refuse):
    the file there once the lock is held, since a writer that replaces the file whole (`merge`) may
    swap it between the open and the lock.  The caller closes it, which releases the lock."""
    path = Path(path)
    check_output_file(path)
    make_folder(path.parent)
    handle = open(path, "ab")
    try:
        lock_or_refuse(handle.fileno(), path, what)
        while os.fstat(handle.fileno()).st_ino != os.stat(path).st_ino:
            handle.close()
            handle = open(path, "ab")
            lock_or_refuse(handle.fileno(), path, what)
    except BaseException:
        handle.close()
        raise
    return handle


@contextlib.contextmanager
def locked_folder(path, what: str):
    """Hold the lock of folder `path` (created if needed) while the block runs."""
    path = Path(path)
    make_folder(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        lock_or_refuse(fd, path, what)
        yield path
    finally:
        os.close(fd)


def _lock_holder(path) -> int | None:
    """The PID holding a flock on `path`, from /proc/locks (Linux); None where it cannot be told
    (another OS, or a holder on another node of a network filesystem)."""
    try:
        st = os.stat(path)
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    device = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == device:
                return int(fields[4])
        except ValueError:
            continue
    return None
