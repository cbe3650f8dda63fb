"""Prints each stacked expert tensor's format in the GGUF and the artifact,
and their total bytes side by side."""
import json
import sys

import gguf

reader = gguf.GGUFReader(sys.argv[1])
manifest = json.load(open(sys.argv[2]))
stored = {t["name"]: t for t in manifest["weights"]["tensors"]}
gguf_bytes = artifact_bytes = 0
for t in reader.tensors:
    if "_exps" not in t.name:
        continue
    mine = stored[t.name]
    print(f"{t.name}: gguf {t.tensor_type.name.lower()} artifact {mine['format']}")
    gguf_bytes += int(t.n_bytes)
    artifact_bytes += int(mine["bytes"])
print(f"expert bytes: artifact {artifact_bytes}, gguf {gguf_bytes} "
      f"(ratio {artifact_bytes / gguf_bytes:.4f})")
