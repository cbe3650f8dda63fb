"""Test helper: damages a model file in one precise way.

  patch_bytes.py FILE replace OLD NEW   replace the first occurrence of the
                                        bytes OLD by NEW (same length)
  patch_bytes.py FILE truncate N        keep only the first N bytes
"""
import sys

path, op = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
if op == "replace":
    old, new = sys.argv[3].encode(), sys.argv[4].encode()
    assert len(old) == len(new), "replacement must keep the length"
    at = data.find(old)
    assert at >= 0, f"{sys.argv[3]!r} not found in {path}"
    data = data[:at] + new + data[at + len(old):]
elif op == "truncate":
    data = data[: int(sys.argv[3])]
else:
    sys.exit(f"unknown operation {op}")
open(path, "wb").write(data)
