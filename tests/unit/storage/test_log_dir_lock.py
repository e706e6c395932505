"""The log dir lock between real processes: refused while held (naming the holder's PID),
free again once the holder is gone, however it went."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from moldau.storage.log_dir_lock import LOCK_FILE, LogDirLockedError, LogDirLocks

HOLD = """
import sys, time
from pathlib import Path
from moldau.storage.log_dir_lock import LogDirLocks
LogDirLocks.acquire([Path(d) for d in sys.argv[1:]])
print("locked", flush=True)
time.sleep(60)
"""


def hold(*dirs: Path) -> subprocess.Popen[str]:
    """Another process holding the locks of ``dirs`` until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, *map(str, dirs)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    return proc


def test_a_held_dir_is_refused_naming_the_holder_until_it_is_killed(tmp_path: Path) -> None:
    held = hold(tmp_path)
    try:
        with pytest.raises(LogDirLockedError) as refused:
            LogDirLocks.acquire([tmp_path])
        assert str(refused.value) == (
            f"log dir {tmp_path} is locked by another process (PID {held.pid})"
        )
    finally:
        held.send_signal(signal.SIGKILL)
        held.wait()
    locks = LogDirLocks.acquire([tmp_path])  # kill -9 left nothing to clean
    assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    locks.release()


def test_all_dirs_or_none(tmp_path: Path) -> None:
    free, taken = tmp_path / "free", tmp_path / "taken"
    held = hold(taken)
    try:
        with pytest.raises(LogDirLockedError, match="taken"):
            LogDirLocks.acquire([free, taken])
        LogDirLocks.acquire([free]).release()  # the failed attempt did not keep `free`
    finally:
        held.kill()
        held.wait()


def test_the_lock_excludes_this_process_too_and_release_frees_it(tmp_path: Path) -> None:
    locks = LogDirLocks.acquire([tmp_path / "new"])
    assert locks.dirs == [tmp_path / "new"]
    with pytest.raises(LogDirLockedError, match=f"PID {os.getpid()}"):
        LogDirLocks.acquire([tmp_path / "new"])
    locks.release()
    LogDirLocks.acquire([tmp_path / "new"]).release()
