"""GGML tensor types: gguf-py (imported lazily), which type each matrix
gets, and quantizing to / dequantizing from it."""
from __future__ import annotations

import functools
import os

import numpy as np

from .config import GGUF_TYPES, SynthError


def _gguf():
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise SynthError("GGUF output needs the PyPI `gguf` package "
                         "(pip install gguf)") from None
    return gguf


def _gguf_qtype(gguf_type: str):
    g = _gguf()
    if gguf_type not in GGUF_TYPES:
        known = getattr(g.GGMLQuantizationType, gguf_type.upper(), None)
        if known is not None:
            try:
                block = g.GGML_QUANT_SIZES[known][0]
                g.quants.quantize(np.zeros((1, block * 8), np.float32), known)
                can = "can quantize to it, but this tool does not offer it"
            except Exception:  # noqa: BLE001  (NotImplementedError in gguf-py)
                can = "cannot quantize to it"
            raise SynthError(
                f"gguf-type: {gguf_type} is a GGML type that this tool does not write "
                f"(the installed gguf-py {_gguf_version()} {can}); supported: "
                f"{', '.join(GGUF_TYPES)}")
        raise SynthError(f"gguf-type: {gguf_type!r} is not one of {', '.join(GGUF_TYPES)}")
    return getattr(g.GGMLQuantizationType, gguf_type.upper())


def _gguf_version() -> str:
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # noqa: BLE001
        return "?"


def _matrix_type(gguf_type: str, shape: tuple[int, ...]) -> str:
    """The GGUF type a matrix gets: gguf_type, or f16 where its rows are not a
    whole number of quantization blocks (as convert_hf_to_gguf.py does). 1D
    tensors stay f32. A 3D tensor (a MoE layer's stacked experts [E, rows,
    cols]) is quantized as a matrix: row by row, rows of the last dimension."""
    if len(shape) not in (2, 3):
        return "f32"
    if gguf_type in ("f32", "f16", "bf16"):
        return gguf_type
    g = _gguf()
    block = g.GGML_QUANT_SIZES[_gguf_qtype(gguf_type)][0]
    return gguf_type if shape[-1] % block == 0 else "f16"


def _encode_gguf_tensor(a: np.ndarray, ttype: str):
    """-> (array for GGUFWriter.add_tensor, raw_dtype or None)."""
    g = _gguf()
    if ttype == "f32":
        return np.ascontiguousarray(a, dtype=np.float32), None
    if ttype == "f16":
        return np.ascontiguousarray(a, dtype=np.float16), None
    qt = _gguf_qtype(ttype)
    if ttype.endswith("_k"):  # gguf-py cannot quantize k-quants: kquant.py
        return getattr(_kquant(), ttype)(np.ascontiguousarray(a, dtype=np.float32)), qt
    try:
        q = g.quants.quantize(np.ascontiguousarray(a, dtype=np.float32), qt)
    except (NotImplementedError, getattr(g.quants, "QuantError", NotImplementedError)) as e:
        raise SynthError(f"gguf-type {ttype}: the installed gguf package cannot "
                         f"quantize to it ({e})") from None
    return q, qt


@functools.lru_cache(maxsize=None)
def _kquant():
    """kquant.py beside synth_model.py (the folder above this package),
    however this package was imported."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "kquant.py")
    spec = importlib.util.spec_from_file_location("llmc_synth_kquant", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dequantize(a: np.ndarray, ttype: str) -> np.ndarray:
    if ttype == "f32":
        return a.astype(np.float32)
    if ttype == "f16":
        return a.astype(np.float16).astype(np.float32)
    g = _gguf()
    q, qt = _encode_gguf_tensor(a, ttype)
    return g.quants.dequantize(q, qt).reshape(a.shape).astype(np.float32)


def _file_type(gguf_type: str):
    g = _gguf()
    return {"f32": g.LlamaFileType.ALL_F32, "f16": g.LlamaFileType.MOSTLY_F16,
            "bf16": g.LlamaFileType.MOSTLY_BF16, "q8_0": g.LlamaFileType.MOSTLY_Q8_0,
            "q4_0": g.LlamaFileType.MOSTLY_Q4_0, "q4_1": g.LlamaFileType.MOSTLY_Q4_1,
            "q5_0": g.LlamaFileType.MOSTLY_Q5_0, "q5_1": g.LlamaFileType.MOSTLY_Q5_1,
            "q2_k": g.LlamaFileType.MOSTLY_Q2_K, "q3_k": g.LlamaFileType.MOSTLY_Q3_K_M,
            "q4_k": g.LlamaFileType.MOSTLY_Q4_K_M, "q5_k": g.LlamaFileType.MOSTLY_Q5_K_M,
            "q6_k": g.LlamaFileType.MOSTLY_Q6_K}[gguf_type]
