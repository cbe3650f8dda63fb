#!/usr/bin/env python3
"""Checks scripts/gemm-table.py on tiny synthetic inputs written to a
temporary folder: two `inspect --kernels --json` reports (q4_0 and bf16
weights) with a prefill shape, an ncu CSV of the generated GEMMs (two
metrics per launch, ncu's own ==PROF== lines, thousands separators) and one
of a --gemm=cublaslt run (cuBLASLt's kernels between each kernel's operand
and epilogue launches). Checks the TFLOP/s, the DRAM-to-weight ratios (with and without the activations), the
cuBLASLt ratio and the exit status on bad input. Needs no GPU and no build.

  scripts/gemm-table-selftest.py [-v]
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "gemm-table.py")
VERBOSE = "-v" in sys.argv[1:]
failures = []

P = "prefill 512"


def report(fmt):
    def launch(sym, flops):
        return {"symbol": sym, "shapes": [{"shape": P, "runs": True, "tensor_flops": flops}]}
    # Kernel 1: 6144x4096 (QKV), kernel 4: 28672x4096 (gate/up).
    return {"shapes": [{"name": "decode 1x512"}, {"name": P}],
            "kernels": [{"index": 1, "ops": f"rms_norm 4096 + linear {fmt} 6144x4096 + split",
                         "launches": [launch("llmc_cuda_k1_gemm_l", 2 * 512 * 6144 * 4096)]},
                        {"index": 4, "ops": f"rms_norm 4096 + linear {fmt} 28672x4096 + silu",
                         "launches": [launch("llmc_cuda_k4_gemm_l", 2 * 512 * 28672 * 4096)]}]}


HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def row(ident, name, metric, unit, value):
    return (f'"{ident}","1","llmc-rt","h","{name}","1","7","(128, 1, 1)","(4, 96, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


def launches(items):
    lines = ["==PROF== Connected to process 1", HEADER]
    for i, (name, ns, dram) in enumerate(items):
        lines.append(row(i, name, "gpu__time_duration.sum", "ns", ns))
        if dram is not None:
            lines.append(row(i, name, "dram__bytes_read.sum", "byte", dram))
    return "\n".join(lines) + "\n"


def run(*args):
    p = subprocess.run([sys.executable, TABLE] + list(args), capture_output=True, text=True)
    if VERBOSE:
        print(p.stdout, p.stderr)
    return p.returncode, p.stdout, p.stderr


def check(what, ok, detail=""):
    if not ok:
        failures.append(f"{what} {detail}")
    print(("ok   " if ok else "FAIL ") + what)


with tempfile.TemporaryDirectory() as d:
    def put(name, text):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text if isinstance(text, str) else json.dumps(text))
        return path

    q4, bf = put("q4.json", report("q4_0")), put("bf16.json", report("bf16"))
    # Two layers. QKV: 100 us, 15.0 MB read each (its weight: 6144 x 4096 x
    # 18/32 = 14.16 MB); gate/up 400 us, 70 MB (66.06 MB).
    own = put("own.csv", launches([
        ("llmc_cuda_k1_operand", 3000, 1e6), ("void llmc_cuda_k1_gemm_l(llmc_cuda_step_info, llmc_cuda_args)", "100,000", "15,000,000"),
        ("llmc_cuda_k4_operand", 3000, 1e6), ("llmc_cuda_k4_gemm_l", 400000, 70e6),
        ("llmc_cuda_k1_operand", 3000, 1e6), ("llmc_cuda_k1_gemm_l", 100000, 15e6),
        ("llmc_cuda_k4_operand", 3000, 1e6), ("llmc_cuda_k4_gemm_l", 400000, 70e6)]))
    # cuBLASLt: QKV in two kernels (50 + 30 us), gate/up 320 us; a decode
    # GEMV after them is no cuBLASLt GEMM.
    peer = put("peer.csv", launches([
        ("llmc_cuda_k1_operand", 3000, None), ("sm90_xmma_gemm_bf16bf16_bf16f32", 50000, None),
        ("cublasLt::splitKreduce_kernel", 30000, None), ("llmc_cuda_k1_lt_epi", 2000, None),
        ("llmc_cuda_k4_operand", 3000, None), ("nvjet_hsh_256x128", 320000, None),
        ("llmc_cuda_k4_lt_epi", 2000, None), ("llmc_cuda_k5_gemv1", 9000, None)]))
    rc, out, err = run("--measured", own, "--predicted", q4, "--peer", peer, "--peer-predicted", bf)
    check("exit 0", rc == 0, err)
    lines = {l.split()[1]: l.split() for l in out.splitlines() if l.startswith("linear")}
    qkv, gu = lines.get("6144x4096"), lines.get("28672x4096")
    check("one row per GEMM", qkv is not None and gu is not None, out)
    if qkv and gu:
        # QKV: 2*512*6144*4096 flops in 100 us = 258 TFLOP/s; 15.0 / 14.2 MB.
        check("launches", qkv[3] == "2" and gu[3] == "2", str(qkv))
        check("TFLOP/s", qkv[5] == "258" and gu[5] == "301", f"{qkv[5]} {gu[5]}")
        check("DRAM and weight MB", qkv[6] == "15.0" and qkv[7] == "14.2", f"{qkv[6]} {qkv[7]}")
        check("read / weight", qkv[8] == "1.06" and gu[8] == "1.06", f"{qkv[8]} {gu[8]}")
        # With the 512 x 4096 bf16 activations (4.19 MB): 15.0 / 18.35 and
        # 70 / 70.25.
        check("read / (weight + act)", qkv[9] == "0.82" and gu[9] == "1.00", f"{qkv[9]} {gu[9]}")
        # cuBLASLt: QKV 80 us (its two kernels), gate/up 320: 0.80x each.
        check("cuBLASLt us", qkv[10] == "80.0" and gu[10] == "320.0", f"{qkv[10]} {gu[10]}")
        check("cuBLASLt / ours", qkv[12] == "0.80" and gu[12] == "0.80", f"{qkv[12]} {gu[12]}")
    rc, out, _ = run("--measured", own, "--predicted", q4, "--markdown")
    check("markdown, no peer", rc == 0 and "| linear 6144x4096 | q4_0 | 2 |" in out, out)

    # Bad inputs: exit 2 with the file named.
    rc, _, err = run("--measured", peer, "--predicted", q4)
    check("no generated GEMM: exit 2", rc == 2 and "no generated GEMM" in err, err)
    rc, _, err = run("--measured", own, "--predicted", q4, "--shape", "prefill 9")
    check("unknown shape: exit 2", rc == 2 and "no shape 'prefill 9'" in err, err)
    bad = put("bad.csv", launches([("llmc_cuda_k1_gemm_l", "fast", None)]))
    rc, _, err = run("--measured", bad, "--predicted", q4)
    check("bad number: exit 2 naming the line", rc == 2 and "bad.csv:3" in err, err)
    other = put("other.csv", launches([("llmc_cuda_k9_gemm", 1000, 1)]))
    rc, _, err = run("--measured", other, "--predicted", q4)
    check("kernel not in the report: exit 2", rc == 2 and "kernel 9" in err, err)
    rc, _, err = run("--measured", own, "--predicted", q4, "--peer", peer)
    check("--peer alone: exit 2", rc == 2, err)

print(f"gemm-table selftest: {'FAILED: ' + '; '.join(failures) if failures else 'all passed'}")
sys.exit(1 if failures else 0)
