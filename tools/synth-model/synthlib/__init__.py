"""The modules behind synth_model.py (import that, not this package).

config         constants, SynthError, Config / make_config
weights        tensor list and seeded weights
vocab          byte-level BPE vocabulary and tokenizer.json
files          atomic file writes
safetensors_io one .safetensors file, by hand
hf             the Hugging Face folder
gguf_types     GGML types: gguf-py, quantize / dequantize (k-quants: ../kquant.py)
gguf_layout    HF -> GGUF names, Q/K permutation, rope_freqs, tensor plan
gguf_writer    GGUF files and dequantized_weights
cli            describe() and the command line
"""
