#!/usr/bin/env python3
"""Each GEMM of a measured prefill: its time, TFLOP/s, and DRAM bytes read
against its weight bytes; and the same GEMM shapes on cuBLASLt (bf16) from a
second run, as ratios.

  scripts/gemm-table.py --measured NCU.csv --predicted REPORT.json
      [--peer NCU.csv --peer-predicted REPORT.json] [--shape NAME] [--markdown]

--measured: `ncu --csv --print-units base --metrics
gpu__time_duration.sum,dram__bytes_read.sum` over a run of llmc's own GEMMs
(e.g. `llmc-rt bench ART -p 512 -n 0 -r 1 --no-warmup`): one row per launch
and metric. Its GEMM launches are the generated entries `llmc_cuda_kN_gemm`
and `llmc_cuda_kN_gemm_l`; kernel N's `ops` in --predicted (`llmc inspect
ART --kernels --json --prefill=T` of the same artifact) give the GEMM's
shape and weight format, hence its weight bytes, and the report's
tensor_flops for --shape (default: its first prefill shape) its work.

--peer: the same kind of CSV over a run with `--gemm=cublaslt` (of the bf16
artifact, say), with --peer-predicted its report: the kernels between
kernel N's `_operand` (or `_lt_deq`) launch and its `_lt_epi` launch are
cuBLASLt's GEMM for kernel N, summed per occurrence. Rows are matched by
the GEMM's shape (`linear 28672x4096`), whatever the weight format.

One row per GEMM kernel: launches, microseconds per launch, TFLOP/s, DRAM
MB read per launch, weight MB, their ratio (the issue's goal: <= 1.3), the
ratio to the weight and the 16-bit activation operand together (rows x K x
2 bytes: what reading every byte once costs; at 512 tokens a 4-bit down
projection's activations are 0.44 of its weights, so read/weight cannot
reach 1.3 there however the tiles are ordered), and
with --peer the cuBLASLt time, its TFLOP/s and cuBLASLt time / ours (above
1: ours is faster). Exit status 0, or 2 on bad input (a message names the
file and line).
"""
import argparse
import importlib.util
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("kmc", os.path.join(HERE, "kernel-model-check.py"))
kmc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kmc)
BadInput, number, kernel_symbol, UNITS = kmc.BadInput, kmc.number, kmc.kernel_symbol, kmc.UNITS

# Bytes per weight element of each format (GGUF block sizes).
BYTES_PER_WEIGHT = {
    "f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32,
    "q5_0": 22 / 32, "q5_1": 24 / 32, "q2_k": 84 / 256, "q3_k": 110 / 256, "q4_k": 144 / 256,
    "q5_k": 176 / 256, "q6_k": 210 / 256,
}
GEMM_SYMBOL = re.compile(r"^llmc_cuda_k(\d+)_gemm(_l)?$")
SIDE_SYMBOL = re.compile(r"^llmc_cuda_k(\d+)_(operand|lt_deq|lt_epi)$")
LINEAR = re.compile(r"\b(linear|lm_head) (\w+) (\d+)x(\d+)")


def read_launches(path):
    """[(id, symbol, microseconds, dram bytes read or None)] in launch order."""
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None
    header_at = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if header_at is None:
        raise BadInput(f"{path}: no ncu CSV header (a line starting with \"ID\")")
    launches = {}
    need = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
    for where, row in kmc.ncu_csv_rows(path, lines, header_at, need):
        ident = int(number(row["ID"], where))
        entry = launches.setdefault(ident, [ident, kernel_symbol(row["Kernel Name"]), None, None])
        metric, unit = row["Metric Name"], row["Metric Unit"].strip()
        value = number(row["Metric Value"], where)
        if metric == "gpu__time_duration.sum":
            if unit not in UNITS:
                raise BadInput(f"{where}: unit {unit!r} (ncu --print-units base)")
            entry[2] = value * UNITS[unit]
        elif metric == "dram__bytes_read.sum":
            if unit not in ("byte", "B", "bytes"):
                raise BadInput(f"{where}: unit {unit!r} for DRAM bytes (ncu --print-units base)")
            entry[3] = value
    out = [tuple(e) for _, e in sorted(launches.items())]
    missing = [e for e in out if e[2] is None]
    if not out or missing:
        raise BadInput(f"{path}: " + ("no launches" if not out else
                                      f"launch {missing[0][0]} has no gpu__time_duration.sum"))
    return out


def read_report(path, shape):
    """kernel index -> (ops, {symbol: tensor_flops per launch at the shape}), the shape's name."""
    try:
        report = json.load(open(path, encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: not an inspect --kernels --json report ({e})") from None
    names = [s["name"] for s in report.get("shapes", [])]
    if shape is None:
        shape = next((n for n in names if n.startswith("prefill")), None)
    if shape not in names:
        raise BadInput(f"{path}: no shape {shape!r} (shapes: {', '.join(names) or 'none'})")
    kernels = {}
    for k in report.get("kernels", []):
        flops = {}
        for l in k.get("launches", []):
            for s in l.get("shapes", []):
                if s.get("shape") == shape and s.get("runs"):
                    flops[l["symbol"]] = float(s.get("tensor_flops", 0.0)) + float(s.get("flops", 0.0))
        kernels[int(k["index"])] = (k.get("ops", ""), flops)
    return kernels, shape


def gemm_shape(ops):
    """(kind, format, rows, K) of a kernel's ops, or None."""
    m = LINEAR.search(ops)
    return (m.group(1), m.group(2).lower(), int(m.group(3)), int(m.group(4))) if m else None


def operand_rows(kind, shape):
    """Activation rows a GEMM of `kind` reads at report shape `shape`: T
    tokens for a linear, the logits rows for an LM head (a prefill's last
    row only; a decode step's every sequence); None when the name says
    neither."""
    m = re.match(r"prefill (\d+)$", shape)
    if m:
        return int(m.group(1)) if kind == "linear" else 1
    m = re.match(r"decode (\d+)x\d+$", shape)
    return int(m.group(1)) if m else None


def own_rows(launches, kernels, path):
    rows = {}
    for _, sym, us, dram in launches:
        m = GEMM_SYMBOL.match(sym)
        if not m:
            continue
        k = int(m.group(1))
        if k not in kernels:
            raise BadInput(f"{path}: {sym}: kernel {k} is not in the report (another artifact?)")
        r = rows.setdefault(k, {"symbols": set(), "n": 0, "us": 0.0, "dram": 0.0, "dram_n": 0,
                                "flops": 0.0})
        r["symbols"].add(sym)
        r["n"] += 1
        r["us"] += us
        r["flops"] += kernels[k][1].get(sym, 0.0)
        if dram is not None:
            r["dram"] += dram
            r["dram_n"] += 1
    return rows


def peer_rows(launches):
    """kernel index -> [microseconds of each cuBLASLt GEMM of that kernel]."""
    out, current, acc = {}, None, 0.0
    for _, sym, us, _ in launches:
        m = SIDE_SYMBOL.match(sym)
        if m:
            k, part = int(m.group(1)), m.group(2)
            if part == "lt_epi":
                if current == k and acc > 0:
                    out.setdefault(k, []).append(acc)
                current, acc = None, 0.0
            elif current != k:
                current, acc = k, 0.0
            continue
        if current is not None and not sym.startswith("llmc_cuda_"):
            acc += us
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measured", required=True)
    ap.add_argument("--predicted", required=True)
    ap.add_argument("--peer")
    ap.add_argument("--peer-predicted")
    ap.add_argument("--shape")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    try:
        if bool(a.peer) != bool(a.peer_predicted):
            raise BadInput("--peer and --peer-predicted go together")
        kernels, shape = read_report(a.predicted, a.shape)
        rows = own_rows(read_launches(a.measured), kernels, a.measured)
        if not rows:
            raise BadInput(f"{a.measured}: no generated GEMM launches (llmc_cuda_kN_gemm[_l])")
        peer = {}
        if a.peer:
            pk, _ = read_report(a.peer_predicted, a.shape)
            for k, times in peer_rows(read_launches(a.peer)).items():
                s = gemm_shape(pk.get(k, ("", {}))[0])
                if s:
                    peer[(s[0], s[2], s[3])] = sum(times) / len(times)
    except BadInput as e:
        print(f"gemm-table: {e}", file=sys.stderr)
        return 2

    head = ["GEMM", "format", "launches", "us", "TFLOP/s", "DRAM MB", "weight MB", "read/weight",
            "read/(weight+act)"]
    if a.peer:
        head += ["cuBLASLt us", "cuBLASLt TFLOP/s", "cuBLASLt/ours"]
    table = []
    for k in sorted(rows):
        r, ops = rows[k], kernels[k][0]
        s = gemm_shape(ops)
        us = r["us"] / r["n"]
        flops = r["flops"] / r["n"]
        weight = BYTES_PER_WEIGHT.get(s[1], float("nan")) * s[2] * s[3] if s else float("nan")
        dram = r["dram"] / r["dram_n"] if r["dram_n"] else float("nan")
        act_rows = operand_rows(s[0], shape) if s else None
        act = 2.0 * act_rows * s[3] if act_rows else float("nan")
        line = [f"{s[0]} {s[2]}x{s[3]}" if s else ops, s[1] if s else "?", str(r["n"]),
                f"{us:.1f}", f"{flops / us / 1e6:.0f}" if flops else "-",
                f"{dram / 1e6:.1f}", f"{weight / 1e6:.1f}", f"{dram / weight:.2f}",
                f"{dram / (weight + act):.2f}"]
        if a.peer:
            p = peer.get((s[0], s[2], s[3])) if s else None
            line += ([f"{p:.1f}", f"{flops / p / 1e6:.0f}" if flops else "-", f"{p / us:.2f}"]
                     if p else ["-", "-", "-"])
        table.append(line)
    print(f"GEMMs of {shape}: {a.measured}" + (f" vs cuBLASLt {a.peer}" if a.peer else ""))
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for line in table:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(x[i]) for x in table + [head]) for i in range(len(head))]
        for line in [head] + table:
            print("  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(line, widths))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
