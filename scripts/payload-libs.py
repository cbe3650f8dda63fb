#!/usr/bin/env python3
"""The shared libraries a binary needs beyond a base system, for a payload
that must run on a machine with nothing installed (the GPU machine has a
driver, CUDA and Python, but not abseil, prometheus-cpp or Open MPI).

  payload-libs.py collect BINARY LIBDIR   copy every library `ldd BINARY`
                                          names that is not on the base
                                          allow-list into LIBDIR (Open MPI's
                                          into LIBDIR/mpi-fallback), then verify
  payload-libs.py verify BINARY LIBDIR    exit 1, naming each one, when a
                                          library outside the allow-list is
                                          neither in LIBDIR nor in
                                          LIBDIR/mpi-fallback, or when ldd
                                          cannot find one here at all

The allow-list is explicit: the C and C++ runtimes and what every Linux
distribution ships in its base image. Everything else travels with the
payload, so a library added to the runtime's link line (as prometheus-cpp
was, which the first H200 run had to add by hand) either travels or stops
the payload's build. libcuda, libnccl and cuBLASLt are not linked (the
runtime dlopens them), so they never appear here.
"""
import os
import re
import shutil
import subprocess
import sys

# sonames up to their first ".so": the base system of any glibc Linux.
BASE = {
    "linux-vdso", "linux-gate", "ld-linux-x86-64", "ld-linux-aarch64", "ld-linux",
    "libc", "libm", "libdl", "libpthread", "librt", "libutil", "libresolv", "libanl",
    "libstdc++", "libgcc_s", "libatomic", "libz", "libcrypt",
}
# Open MPI and what it pulls in: kept apart (gpu-check.sh puts them on the
# loader's path only where the machine has no libmpi.so.40 of its own, so
# that mpirun's ranks use the machine's Open MPI when there is one).
MPI = re.compile(r"^lib(mpi|open-rte|open-pal|hwloc|event|event_core|event_pthreads|pmix|"
                 r"prrte|ucp|ucs|uct|ucm|fabric|psm2|ibverbs|rdmacm|numa|udev|cap|ltdl)"
                 r"([-.][0-9.]*)?$")  # libevent_core-2.1.so.7: a version in the name


def stem(soname):
    return soname.split(".so")[0]


def needed(binary):
    """[(soname, resolved path or None)] of every library ldd lists, the
    transitive ones too; the base ones left out."""
    r = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"payload-libs: ldd {binary} failed ({r.returncode}): {r.stderr.strip()}")
    libs = []
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(\S+|not found)", line)
        if not m:
            continue  # the vDSO and the loader itself
        name, path = m.group(1), m.group(2)
        if stem(os.path.basename(name)) in BASE:
            continue
        libs.append((name, None if path == "not found" else path))
    return libs


def dest(libdir, soname):
    sub = "mpi-fallback" if MPI.match(stem(soname)) else ""
    return os.path.join(libdir, sub, soname)


def verify(binary, libdir):
    problems = []
    libs = needed(binary)
    for name, path in libs:
        if path is None:
            problems.append(f"{name}: ldd finds it nowhere on this machine")
        elif not os.path.isfile(dest(libdir, name)):
            problems.append(f"{name} ({path}) is not in {os.path.dirname(dest(libdir, name))}")
    for p in problems:
        print(f"payload-libs: MISSING {p}", file=sys.stderr)
    if problems:
        print(f"payload-libs: {binary} needs {len(problems)} library(ies) the payload lacks; "
              "a machine without them could not start it", file=sys.stderr)
        return 1
    print(f"payload-libs: {len(libs)} libraries beyond the base system, all carried "
          f"({', '.join(sorted(n for n, _ in libs))})")
    return 0


def collect(binary, libdir):
    for name, path in needed(binary):
        if path is None:
            continue  # verify names it
        target = dest(libdir, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy(path, target)  # follows the soname link: the file itself
    return verify(binary, libdir)


def main(argv):
    if len(argv) != 3 or argv[0] not in ("collect", "verify"):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, binary, libdir = argv
    return collect(binary, libdir) if cmd == "collect" else verify(binary, libdir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
