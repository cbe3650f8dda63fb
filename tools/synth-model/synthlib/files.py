"""Atomic file writes shared by the HF and GGUF writers."""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Iterable


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _write_atomic(path: str, chunks: Iterable[bytes]) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".synth-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c)
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

def _write_json(path: str, obj: Any) -> None:
    _write_atomic(path, [(json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()])
