"""Test helper: flips every bit of the byte at OFFSET in FILE."""
import sys

path, offset = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read())
data[offset] ^= 0xFF
open(path, "wb").write(bytes(data))
