"""K-quant block quantizers for synthetic GGUF files (gguf-py only
dequantizes the k-quants). Simple, not llama.cpp's search for the best
scales: every block is a valid ggml block, and what matters for the tests is
that readers decode it as ggml does (the references dequantize the same
bytes with gguf-py, independently of llmc's decoders).

Each takes float32 [..., 256 * n] and returns uint8 [..., bytes_per_block * n]:
Q2_K 84 bytes (scales|mins nibbles, 2-bit quants, f16 d and dmin), Q3_K 110
bytes (high-bit mask, 2-bit quants, 6-bit signed scales, f16 d), Q4_K 144
(f16 d and dmin, 6-bit scales and mins packed in 12 bytes, 4-bit quants),
Q5_K 176 (as Q4_K plus a fifth bit per element), Q6_K 210 (low 4 bits, high
2 bits, 8-bit signed scales of 16 elements, f16 d).
"""
import numpy as np


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16)


def _signed_subblocks(sb, half, scale_div, scale_lo, scale_hi):
    """Q3_K/Q6_K: 16 sub-blocks of 16, each with a signed integer scale in
    [scale_lo, scale_hi] times one f16 d (the largest at scale_div), and
    quants in [-half, half): the element of largest magnitude maps to -half.
    -> (d, scales, quants)."""
    idx = np.abs(sb).argmax(1)
    scale = -sb[np.arange(16), idx] / half
    d = float(f16(np.abs(scale).max() / scale_div))
    sc = (np.clip(np.round(scale / d), scale_lo, scale_hi).astype(np.int32)
          if d > 0 else np.zeros(16, np.int32))
    q = np.zeros((16, 16), np.int32)
    for s in range(16):
        step = d * sc[s]
        if step != 0:
            q[s] = np.clip(np.round(sb[s] / step), -half, half - 1)
    return d, sc, q


def _min_subblocks(sb, nq, scale_max):
    """Q2_K/Q4_K/Q5_K: sub-blocks (rows of sb) of x = d*sc*q - dm*m, with
    unsigned integer scales sc and mins m in [0, scale_max] times one f16 d
    and dm each, and quants q in [0, nq]. -> (d, dm, sc, m, q)."""
    n = sb.shape[0]
    lo = np.minimum(sb.min(1), 0)
    scale = (sb.max(1) - lo) / nq
    mn = -lo
    d = float(f16(scale.max() / scale_max))
    dm = float(f16(mn.max() / scale_max))
    sc = (np.clip(np.round(scale / d), 0, scale_max).astype(np.int32)
          if d > 0 else np.zeros(n, np.int32))
    m = (np.clip(np.round(mn / dm), 0, scale_max).astype(np.int32)
         if dm > 0 else np.zeros(n, np.int32))
    q = np.zeros(sb.shape, np.int32)
    for s in range(n):
        step = d * sc[s]
        if step > 0:
            q[s] = np.clip(np.round((sb[s] + dm * m[s]) / step), 0, nq)
    return d, dm, sc, m, q


def q2_k(x):  # x: [..., 256*n] float32 -> uint8 [..., 84*n]
    rows = x.reshape(-1, 256).astype(np.float32)
    out = np.zeros((rows.shape[0], 84), np.uint8)
    for r, b in enumerate(rows):
        d, dm, sc, m, q = _min_subblocks(b.reshape(16, 16), 3, 15)
        out[r, :16] = (sc | (m << 4)).astype(np.uint8)
        qs = np.zeros(64, np.int32)
        for e in range(256):
            h, j, s2, l = e >> 7, (e >> 5) & 3, (e >> 4) & 1, e & 15
            qs[32 * h + 16 * s2 + l] |= q[e >> 4, e & 15] << (2 * j)
        out[r, 16:80] = qs.astype(np.uint8)
        out[r, 80:82] = np.frombuffer(f16(d).tobytes(), np.uint8)
        out[r, 82:84] = np.frombuffer(f16(dm).tobytes(), np.uint8)
    return out.reshape(*x.shape[:-1], x.shape[-1] // 256 * 84)

def q3_k(x):
    rows = x.reshape(-1, 256).astype(np.float32)
    out = np.zeros((rows.shape[0], 110), np.uint8)
    for r, b in enumerate(rows):
        d, sc, v = _signed_subblocks(b.reshape(16, 16), 4, 32, -32, 31)
        q3 = v + 4
        hmask = np.zeros(32, np.int32); qs = np.zeros(64, np.int32)
        for e in range(256):
            h, j, s2, l = e >> 7, (e >> 5) & 3, (e >> 4) & 1, e & 15
            qv = q3[e >> 4, e & 15]
            qs[32 * h + 16 * s2 + l] |= (qv & 3) << (2 * j)
            hmask[16 * s2 + l] |= (qv >> 2) << (4 * h + j)
        st = (sc + 32).astype(np.int32)
        scb = np.zeros(12, np.int32)
        for n in range(16):
            low, high = st[n] & 15, st[n] >> 4
            if n < 8: scb[n] |= low
            else: scb[n - 8] |= low << 4
            scb[8 + n % 4] |= high << (2 * (n // 4))
        out[r, :32] = hmask.astype(np.uint8)
        out[r, 32:96] = qs.astype(np.uint8)
        out[r, 96:108] = scb.astype(np.uint8)
        out[r, 108:110] = np.frombuffer(f16(d).tobytes(), np.uint8)
    return out.reshape(*x.shape[:-1], x.shape[-1] // 256 * 110)


def _q4_5_k(x, bits):
    nq = (1 << bits) - 1
    size = 144 if bits == 4 else 176
    rows = x.reshape(-1, 256).astype(np.float32)
    out = np.zeros((rows.shape[0], size), np.uint8)
    for r, b in enumerate(rows):
        d, dm, sc, m, q = _min_subblocks(b.reshape(8, 32), nq, 63)
        scb = np.zeros(12, np.int32)
        for j in range(4):  # the inverse of ggml's get_scale_min_k4
            scb[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6)
            scb[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6)
            scb[j + 8] = (sc[j + 4] & 15) | ((m[j + 4] & 15) << 4)
        qs = np.zeros(128, np.int32)
        qh = np.zeros(32, np.int32)
        for e in range(256):
            c, l = e >> 6, e & 63
            v = q[e >> 5, e & 31]
            if l < 32:
                qs[32 * c + l] |= v & 15
                qh[l] |= (v >> 4) << (2 * c)
            else:
                qs[32 * c + l - 32] |= (v & 15) << 4
                qh[l - 32] |= (v >> 4) << (2 * c + 1)
        out[r, 0:2] = np.frombuffer(f16(d).tobytes(), np.uint8)
        out[r, 2:4] = np.frombuffer(f16(dm).tobytes(), np.uint8)
        out[r, 4:16] = scb.astype(np.uint8)
        if bits == 5:
            out[r, 16:48] = qh.astype(np.uint8)
        out[r, size - 128:] = qs.astype(np.uint8)
    return out.reshape(*x.shape[:-1], x.shape[-1] // 256 * size)


def q4_k(x):
    return _q4_5_k(x, 4)


def q5_k(x):
    return _q4_5_k(x, 5)


def q6_k(x):
    rows = x.reshape(-1, 256).astype(np.float32)
    out = np.zeros((rows.shape[0], 210), np.uint8)
    for r, b in enumerate(rows):
        d, sc, q = _signed_subblocks(b.reshape(16, 16), 32, 127, -128, 127)
        q += 32
        ql = np.zeros(128, np.int32)
        qh = np.zeros(64, np.int32)
        for e in range(256):
            n, k, l = e >> 7, (e >> 5) & 3, e & 31
            v = q[e >> 4, e & 15]
            ql[64 * n + l + (32 if k & 1 else 0)] |= (v & 15) << (4 if k >= 2 else 0)
            qh[32 * n + l] |= (v >> 4) << (2 * k)
        out[r, 0:128] = ql.astype(np.uint8)
        out[r, 128:192] = qh.astype(np.uint8)
        out[r, 192:208] = sc.astype(np.int8).view(np.uint8)
        out[r, 208:210] = np.frombuffer(f16(d).tobytes(), np.uint8)
    return out.reshape(*x.shape[:-1], x.shape[-1] // 256 * 210)
