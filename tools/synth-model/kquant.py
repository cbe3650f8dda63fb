"""Q2_K and Q3_K block quantizers for synthetic GGUF files (gguf-py only
dequantizes the k-quants). Simple, not llama.cpp's search for the best
scales: every block is a valid ggml block, and what matters for the tests is
that readers decode it as ggml does (the references dequantize the same
bytes with gguf-py, independently of llmc's decoders).

Both take float32 [..., 256 * n] and return uint8 [..., bytes_per_block * n]:
Q2_K 84 bytes (scales|mins nibbles, 2-bit quants, f16 d and dmin), Q3_K 110
bytes (high-bit mask, 2-bit quants, 6-bit signed scales, f16 d).
"""
import numpy as np


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16)

def q2_k(x):  # x: [..., 256*n] float32 -> uint8 [..., 84*n]
    rows = x.reshape(-1, 256).astype(np.float32)
    out = np.zeros((rows.shape[0], 84), np.uint8)
    for r, b in enumerate(rows):
        sb = b.reshape(16, 16)
        lo = np.minimum(sb.min(1), 0); hi = sb.max(1)
        scale = (hi - lo) / 3; mn = -lo
        d = float(f16(scale.max() / 15)); dm = float(f16(mn.max() / 15))
        sc = np.clip(np.round(scale / d), 0, 15).astype(np.int32) if d > 0 else np.zeros(16, np.int32)
        m = np.clip(np.round(mn / dm), 0, 15).astype(np.int32) if dm > 0 else np.zeros(16, np.int32)
        q = np.zeros((16, 16), np.int32)
        for s in range(16):
            step = d * sc[s]
            if step > 0:
                q[s] = np.clip(np.round((sb[s] + dm * m[s]) / step), 0, 3)
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
        sb = b.reshape(16, 16)
        # signed scale: the element of largest magnitude maps to -4
        idx = np.abs(sb).argmax(1)
        scale = -sb[np.arange(16), idx] / 4
        d = float(f16(np.abs(scale).max() / 32))
        sc = np.clip(np.round(scale / d), -32, 31).astype(np.int32) if d > 0 else np.zeros(16, np.int32)
        v = np.zeros((16, 16), np.int32)
        for s in range(16):
            step = d * sc[s]
            if step != 0:
                v[s] = np.clip(np.round(sb[s] / step), -4, 3)
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
