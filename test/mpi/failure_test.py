#!/usr/bin/env python3
"""A world with a dead or hung rank must end, loudly, within a bound.

Runs `MPIEXEC [flags] -np N PROGRAM --kill-rank R|--hang-rank R --timeout T`
and checks that mpirun exits non-zero within --max-seconds, with the llmc
timeout message (or, for a dead rank, Open MPI's own report of it) in its
output. Exit 0: pass.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

LLMC_TIMEOUT = re.compile(
    r"llmc: rank \d+ of \d+: \w+ of \d+ \w+ did not complete within [\d.]+ s: "
    r"another rank died or hangs; ending all ranks")
# Open MPI's reports of a rank that ended without MPI_Finalize (4.x wording,
# and the shorter forms of other versions and of PRRTE).
OMPI_DEAD_RANK = re.compile(
    r"exited with non-zero status|returned\s+a\s+non-zero\s+exit\s+code|"
    r"exiting\s+improperly|exited\s+on\s+signal")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--numproc-flag", default="-np")
    parser.add_argument("--mpiexec-flag", action="append", default=[],
                        help="an mpirun flag (repeat for several)")
    parser.add_argument("--program", required=True)
    parser.add_argument("--mode", choices=["kill", "hang"], required=True)
    parser.add_argument("--rank", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=5)
    parser.add_argument("--max-seconds", type=float, default=30)
    args = parser.parse_args()

    command = [args.mpiexec, *args.mpiexec_flag, args.numproc_flag, str(args.np), args.program,
               f"--{args.mode}-rank", str(args.rank), "--timeout", str(args.timeout)]
    print("running:", " ".join(command), flush=True)
    start = time.monotonic()
    # Its own process group, so that a world that does not end is killed
    # whole (mpirun and every rank) rather than left behind.
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=args.max_seconds * 2)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    elapsed = time.monotonic() - start
    print(output)
    print(f"mpirun exited with {proc.returncode} after {elapsed:.1f} s", flush=True)

    failures = []
    if proc.returncode == 0:
        failures.append("mpirun exited 0: the world did not notice the missing rank")
    if elapsed >= args.max_seconds:
        failures.append(f"took {elapsed:.1f} s, not under {args.max_seconds:g} s")
    if args.mode == "hang":
        if not LLMC_TIMEOUT.search(output):
            failures.append("no llmc timeout message for the hung rank")
    elif not (LLMC_TIMEOUT.search(output) or OMPI_DEAD_RANK.search(output)):
        failures.append("neither the llmc timeout message nor Open MPI's report of the dead rank")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"PASS: {args.mode} rank {args.rank}: world ended in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
