"""Checks the kernel report's GEMM paths (llmc inspect --kernels --json):
each path's cuBLASLt time is the sum of its parts, its choice is the faster
path, and each step's auto total is its own total less every GEMM kernel's
gain over its uses. Prints one line for the paths, then one per step."""
import json
import sys

REL = 1e-9


def close(a, b):
    return abs(a - b) <= REL * max(abs(a), abs(b), 1e-12)


def main():
    report = json.load(open(sys.argv[1]))
    paths = 0
    sums = choices = True
    gain = {}  # shape -> seconds the faster path saves over all uses
    for k in report["kernels"]:
        for p in k.get("gemm_paths", []):
            paths += 1
            parts = p["deq_s"] + p["pre_s"] + p["matmul"]["seconds"] + p["epi_s"]
            sums = sums and close(parts, p["cublaslt_s"]) and p["deq_s"] >= 0
            faster = "cublaslt" if p["cublaslt_s"] < p["own_s"] else "llmc"
            choices = choices and p["faster"] == faster
            gain[p["shape"]] = gain.get(p["shape"], 0.0) + \
                k["uses"] * max(0.0, p["own_s"] - p["cublaslt_s"])
    print(f"paths {paths} sums {'ok' if sums else 'WRONG'} choices {'ok' if choices else 'WRONG'}")
    for s in report["steps"]:
        want = s["seconds"] - gain.get(s["shape"], 0.0)
        ok = close(want, s["seconds_auto"]) and s["seconds_auto"] <= s["seconds_cublaslt"] + 1e-12
        print(f"{s['shape']} auto {'ok' if ok else 'WRONG: %r vs %r' % (s['seconds_auto'], want)}")


if __name__ == "__main__":
    main()
