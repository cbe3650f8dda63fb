#!/usr/bin/env python3
"""Writes golden dequantization data for llmc's GGML dequantizers.

For each format, seeded random blocks go to test/data/dequant/<format>.bin and
what gguf-py's numpy reference (gguf.quants, the same arithmetic as ggml's
dequantize_row_*) makes of them goes to <format>.f32 (little-endian float32).
The scale fields (d, dmin, m) are set to finite halves, some of them
subnormal, so that every expected value is a number; the quant bytes are
fully random. f16 values exclude NaNs (hardware half->float conversions quiet
signalling NaNs, ggml's portable one does not; test/unit covers NaNs by hand).

If llama-cpp-python is installed, each golden is also checked against ggml's
own C dequantize_row_* from its bundled libggml-base (they agree bit for bit).

Test tooling only: needs `pip install gguf numpy`. Rerun after changing the
seed or the block counts and commit the outputs:
    python3 scripts/gen-dequant-goldens.py
"""
import os
import sys

import numpy as np

try:
    import gguf
    from gguf import quants
except ImportError:
    sys.exit("gen-dequant-goldens: needs the `gguf` package (pip install gguf numpy)")

T = gguf.GGMLQuantizationType
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "data", "dequant")

# format name (as in core/include/llmc/core/weight_format.h) -> (type,
# number of blocks, byte offsets of the f16 scale fields within a block)
FORMATS = {
    "q8_0": (T.Q8_0, 6, [0]),
    "q4_0": (T.Q4_0, 6, [0]),
    "q4_1": (T.Q4_1, 6, [0, 2]),
    "q5_0": (T.Q5_0, 6, [0]),
    "q5_1": (T.Q5_1, 6, [0, 2]),
    "q2_k": (T.Q2_K, 3, [80, 82]),
    "q3_k": (T.Q3_K, 3, [108]),
    "q4_k": (T.Q4_K, 3, [0, 2]),
    "q5_k": (T.Q5_K, 3, [0, 2]),
    "q6_k": (T.Q6_K, 3, [208]),
}


def random_half(rng):
    """A finite half: mostly normal with a modest exponent, sometimes subnormal."""
    if rng.random() < 0.2:
        bits = int(rng.integers(1, 0x400))  # subnormal
    else:
        value = np.float16(rng.uniform(-1.0, 1.0) * 2.0 ** int(rng.integers(-12, 4)))
        bits = int(value.view(np.uint16))
    if rng.random() < 0.5:
        bits |= 0x8000
    return bits


def ggml_c_reference():
    """ggml's C dequantizers from llama-cpp-python's libggml-base, or None."""
    try:
        import ctypes
        import glob
        import llama_cpp
    except ImportError:
        return None
    libs = glob.glob(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so*"))
    if not libs:
        return None
    lib = ctypes.CDLL(libs[0])

    def dequantize(name, raw, count):
        fn = getattr(lib, "dequantize_row_" + name.replace("_k", "_K"))
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        out = np.zeros(count, dtype=np.float32)
        raw = np.ascontiguousarray(raw)
        fn(raw.ctypes.data, out.ctypes.data, count)
        return out

    return dequantize


def write(name, raw, expected):
    expected = np.ascontiguousarray(expected, dtype="<f4")
    with open(os.path.join(OUT, name + ".bin"), "wb") as f:
        f.write(raw.tobytes())
    with open(os.path.join(OUT, name + ".f32"), "wb") as f:
        f.write(expected.tobytes())
    print(f"{name}: {raw.size} bytes -> {expected.size} floats")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240611)
    ggml_c = ggml_c_reference()
    for name, (qtype, n_blocks, half_offsets) in FORMATS.items():
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
        for b in range(n_blocks):
            for off in half_offsets:
                bits = random_half(rng)
                blocks[b, off] = bits & 0xFF
                blocks[b, off + 1] = bits >> 8
        expected = quants.dequantize(blocks.reshape(-1), qtype)
        assert expected.size == n_blocks * block_elems
        if ggml_c is not None:
            c = ggml_c(name, blocks.reshape(-1), expected.size)
            assert (c.view(np.uint32) == expected.astype(np.float32).view(np.uint32)).all(), name
        write(name, blocks.reshape(-1), expected)

    # f16: random bit patterns without NaNs (exponent 31 with a mantissa).
    halves = rng.integers(0, 1 << 16, size=256, dtype=np.uint32).astype(np.uint16)
    halves = halves[~(((halves & 0x7C00) == 0x7C00) & ((halves & 0x03FF) != 0))]
    write("f16", halves.view(np.uint8), quants.dequantize(halves.view(np.uint8), T.F16))
    # bf16: every bit pattern is fine, NaNs included (the conversion is a shift).
    bf16 = rng.integers(0, 1 << 16, size=256, dtype=np.uint32).astype(np.uint16)
    write("bf16", bf16.view(np.uint8), quants.dequantize(bf16.view(np.uint8), T.BF16))
    print("block formats checked against ggml's C dequantizers" if ggml_c else
          "ggml's C dequantizers not found (pip install llama-cpp-python to cross-check)")


if __name__ == "__main__":
    main()
