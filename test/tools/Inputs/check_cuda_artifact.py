"""Checks the CUDA part of an artifact: every launch of every CUDA kernel (and
the halves of each cuBLASLt GEMM it offers) has an entry point in the PTX of
each target and a ptxas report, and no entry
spills registers or uses a stack frame. Prints one summary line per arch.

usage: check_cuda_artifact.py ARTIFACT [--archs sm_80,sm_90] [--manifest PATH]

--manifest names a pipeline stage's manifest inside the artifact
("stages/1/manifest.json"); its paths, like the root one's, are relative to
the artifact.
"""
import argparse
import json
import os
import re
import sys


# One sequence decoding one token over a short context (one split).
DECODE = {"T": 1, "L": 1, "Q": 1, "S": 1, "splits": 1}


def runs(when, step):
    """Whether a launch's `when` ("" or "<var><=|><int>" joined by &&) holds."""
    for cond in filter(None, when.replace(" ", "").split("&&")):
        var, op, bound = re.fullmatch(r"(\w+?)(<=|>)(\d+)", cond).groups()
        if (step[var] <= int(bound)) != (op == "<="):
            return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifact")
    ap.add_argument("--archs", default="sm_80,sm_90")
    ap.add_argument("--manifest", default="manifest.json")
    args = ap.parse_args()
    manifest = json.load(open(os.path.join(args.artifact, args.manifest)))
    cuda = manifest.get("cuda")
    if not cuda:
        sys.exit("no cuda section in %s/manifest.json" % args.artifact)
    symbols = sorted({l["symbol"] for k in cuda["kernels"] for l in k["launches"]} |
                     {k["gemm"][h] for k in cuda["kernels"] if "gemm" in k
                      for h in ("pre", "epi", "deq") if h in k["gemm"]})
    # Collectives (kernel -1, a tensor-parallel plan) run between kernels.
    kernel_steps = [s for s in cuda["steps"] if not s.get("collective")]
    used = {s["kernel"] for s in kernel_steps}
    if used != set(range(len(cuda["kernels"]))):
        sys.exit("kernels not used by any step: %s" % sorted(set(range(len(cuda["kernels"]))) - used))
    failed = False
    modules = {m["arch"]: m for m in cuda["modules"]}
    for arch in args.archs.split(","):
        if arch not in modules:
            sys.exit("no %s module (have %s)" % (arch, sorted(modules)))
        m = modules[arch]
        ptx = open(os.path.join(args.artifact, m["file"])).read()
        if (".target " + arch) not in ptx:
            sys.exit("%s does not target %s" % (m["file"], arch))
        entries = set(re.findall(r"\.visible \.entry (\w+)\(", ptx))
        report = {e["symbol"]: e for e in m["ptxas"]}
        for s in symbols:
            if s not in entries:
                print("%s: %s has no entry in the PTX" % (arch, s))
                failed = True
            elif s not in report:
                print("%s: %s has no ptxas report" % (arch, s))
                failed = True
            else:
                e = report[s]
                if e["spill_stores"] or e["spill_loads"] or e["stack_bytes"]:
                    print("%s: %s spills (%d/%d bytes) or has a stack (%d bytes)" %
                          (arch, s, e["spill_stores"], e["spill_loads"], e["stack_bytes"]))
                    failed = True
        regs = max(report[s]["registers"] for s in symbols if s in report)
        print("%s: %d entries of %d kernels checked by ptxas, 0 spills, max %d registers" %
              (arch, len(symbols), len(cuda["kernels"]), regs))
    print("steps %d (%d collectives), launches per decode step %d" % (
        len(cuda["steps"]), len(cuda["steps"]) - len(kernel_steps),
        sum(sum(1 for l in cuda["kernels"][s["kernel"]]["launches"] if runs(l["when"], DECODE))
            for s in kernel_steps)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
