"""Emptying a folder whatever a student's code did to it: standard library only (judge and zygote)."""

import os
import shutil
from pathlib import Path


def empty(folder: Path) -> None:
    """Remove what is in ``folder``, but not the folder, whatever modes learner code left behind."""
    for entry in Path(folder).iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, onerror=_unlock_and_retry)
        else:
            entry.unlink()


def remove(folder: Path) -> None:
    """Remove ``folder`` and everything in it, whatever modes learner code left behind."""
    shutil.rmtree(folder, onerror=_unlock_and_retry)


def _unlock_and_retry(function, path: str, _error) -> None:
    os.chmod(os.path.dirname(path), 0o700)
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, 0o700)
    function(path)
