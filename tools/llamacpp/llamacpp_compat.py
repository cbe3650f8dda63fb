"""Importing llama-cpp-python the way every llmc script needs it.

llama.cpp's extra buffer types (weight repacking, including the AMX kernels)
are turned off: on VMs that advertise AMX without enabling its tile state,
those kernels die with SIGILL on quantized matmuls. The switch is the model
parameter `use_extra_bufts`; llama-cpp-python's `Llama` builds its parameters
from `llama_model_default_params()` and does not expose it, so that function
is wrapped to return parameters with it off. Every `Llama` made after
`import_llama_cpp()` gets them. The cost: llama.cpp runs ggml's plain CPU
kernels, which may be slower than a build where repacking works.

Used by bench/host_vs_llamacpp.py, scripts/gen-smollm2-goldens.py,
test/reference/test_reference.py and tools/synth-model/selftest.py, which put
this folder on sys.path:

    sys.path.insert(0, os.path.join(ROOT, "tools", "llamacpp"))
    from llamacpp_compat import import_llama_cpp
    llama_cpp, C = import_llama_cpp()   # raises ImportError when absent
"""
from __future__ import annotations


def disable_extra_bufts(C) -> bool:
    """Wraps C.llama_model_default_params (C: the module llama_cpp.llama_cpp)
    so that use_extra_bufts is False. Idempotent. Returns False when this
    llama.cpp has no such parameter (older builds, nothing to turn off)."""
    if not hasattr(C.llama_model_params, "use_extra_bufts"):
        return False
    if getattr(C, "_llmc_no_extra_bufts", False):
        return True
    orig = C.llama_model_default_params

    def params():
        p = orig()
        p.use_extra_bufts = False
        return p
    C.llama_model_default_params = params
    C._llmc_no_extra_bufts = True
    return True


def import_llama_cpp():
    """(llama_cpp, llama_cpp.llama_cpp) with the extra buffer types off.
    Raises ImportError when llama-cpp-python is not installed."""
    import llama_cpp
    import llama_cpp.llama_cpp as C
    disable_extra_bufts(C)
    return llama_cpp, C
