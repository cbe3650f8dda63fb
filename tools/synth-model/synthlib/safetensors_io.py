"""One .safetensors file, written and read by hand (no `safetensors` package)."""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .config import HF_DTYPES, SynthError
from .files import _write_atomic
from .weights import _bf16_bits_to_f32, _f32_to_bf16_bits


def _tensor_bytes(a: np.ndarray, dtype: str) -> bytes:
    if dtype == "f32":
        return np.ascontiguousarray(a, dtype="<f4").tobytes()
    if dtype == "f16":
        return np.ascontiguousarray(a.astype("<f2")).tobytes()
    return _f32_to_bf16_bits(a).astype("<u2").tobytes()

def write_safetensors(path: str, tensors: dict[str, np.ndarray], dtype: str) -> None:
    """Writes one .safetensors file by hand.

    Layout: u64 little-endian header length N, N bytes of JSON (padded with
    spaces so that the data starts at an 8-byte boundary), then the tensors
    back to back in name order with no gaps (the safetensors spec forbids
    holes). Each tensor is 8-byte aligned when the sizes before it are
    multiples of 8 bytes (true for the usual shapes); see README.
    """
    st_dtype = HF_DTYPES[dtype][0]
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs = []
    off = 0
    for name in sorted(tensors):
        b = _tensor_bytes(tensors[name], dtype)
        header[name] = {"dtype": st_dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    _write_atomic(path, [len(h).to_bytes(8, "little"), h, *blobs])

def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """{name: float32 array} from one .safetensors file (F32/F16/BF16)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise SynthError(f"{path}: too short for a safetensors file")
    n = int.from_bytes(data[:8], "little")
    if 8 + n > len(data):
        raise SynthError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        s, e = info["data_offsets"]
        raw = data[base + s:base + e]
        shape = tuple(info["shape"])
        if info["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4").astype(np.float32)
        elif info["dtype"] == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)
        elif info["dtype"] == "BF16":
            a = _bf16_bits_to_f32(np.frombuffer(raw, "<u2"))
        else:
            raise SynthError(f"{path}: {name}: dtype {info['dtype']} unsupported")
        if a.size != math.prod(shape):
            raise SynthError(f"{path}: {name}: {a.size} values for shape {shape}")
        out[name] = a.reshape(shape)
    return out
