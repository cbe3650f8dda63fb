# lit configuration of llmc's IR and tool tests.
#
# Run through ctest (one test per file), or by hand:
#   python3 /usr/lib/llvm-19/build/utils/lit/lit.py -v \
#     --param llmc_site_config=build/test/lit.site.cfg.py test/Dialect
import os

import lit.formats

if not hasattr(config, "llmc_tools_dir"):
    # Started on the source tree: load the build's site config, which sets the
    # paths and loads this file again.
    site = lit_config.params.get("llmc_site_config")
    if not site:
        lit_config.fatal("pass --param llmc_site_config=<build>/test/lit.site.cfg.py")
    lit_config.load_config(config, site)
else:
    config.name = "llmc"
    config.test_format = lit.formats.ShTest(execute_external=False)
    config.suffixes = [".mlir", ".test"]
    config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs", "unit", "build", "CMakeLists.txt"]
    config.test_source_root = os.path.join(config.llmc_src_root, "test")
    config.test_exec_root = os.path.join(config.llmc_obj_root, "test")
    config.environment["PATH"] = os.pathsep.join(
        [config.llmc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
    config.substitutions.append(("%llmc_src", config.llmc_src_root))
    # Tests that need the default model say `REQUIRES: smollm2`; without it
    # they are reported as unsupported, which ctest counts as skipped.
    smollm2 = os.path.join(
        os.environ.get("LLMC_MODEL_DIR", os.path.expanduser("~/.cache/llmc/models")),
        "SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(smollm2):
        config.available_features.add("smollm2")
        config.substitutions.append(("%smollm2", smollm2))
    else:
        lit_config.warning("SmolLM2 GGUF not found at %s: tests that need it are skipped "
                           "(run scripts/fetch-model)" % smollm2)
    # The synthetic-model writer needs numpy and gguf (scripts/setup installs them).
    import subprocess
    import sys
    config.substitutions.append(
        ("%synth", "%s %s" % (sys.executable,
                              os.path.join(config.llmc_src_root, "tools", "synth-model", "synth_model.py"))))
    config.substitutions.append(("%python", sys.executable))
    if subprocess.run([sys.executable, "-c", "import numpy, gguf"],
                      capture_output=True).returncode == 0:
        config.available_features.add("synth")
    else:
        lit_config.warning("python modules numpy/gguf missing: synthetic-model tests are skipped "
                           "(run scripts/setup)")
    # CUDA code generation needs the toolkit's NVRTC and ptxas (not a GPU);
    # found where llmc looks for them (Target/CUDA/NVRTCCompiler.cpp).
    import glob
    cuda_roots = [os.environ.get(v) for v in ("LLMC_CUDA_HOME", "CUDA_HOME", "CUDA_PATH")]
    cuda_roots = [r for r in cuda_roots if r] + ["/usr/local/cuda"]
    if any(glob.glob(os.path.join(r, "lib64", "libnvrtc.so*")) and
           os.path.exists(os.path.join(r, "bin", "ptxas")) for r in cuda_roots):
        config.available_features.add("cuda-toolkit")
    else:
        lit_config.warning("no CUDA toolkit (NVRTC + ptxas): CUDA code generation tests are "
                           "skipped")
    # `llmc inspect --kernels` reads SASS with cuobjdump (or nvdisasm): on PATH, in
    # the toolkit's bin/, or from pip's nvidia-cuda-cuobjdump (scripts/setup
    # installs it) under site-packages/nvidia/*/bin. Found here, it is handed to
    # llmc as LLMC_CUOBJDUMP (lit does not pass the environment on); tests
    # that read SASS say `REQUIRES: cuobjdump` and are unsupported without it.
    import shutil
    import site
    import sysconfig
    disassembler = os.environ.get("LLMC_CUOBJDUMP")
    if not disassembler:
        bins = [os.path.join(r, "bin") for r in cuda_roots]
        sites = site.getsitepackages() + [site.getusersitepackages(),
                                          sysconfig.get_paths()["purelib"]]
        for d in sites:
            bins += sorted(glob.glob(os.path.join(d, "nvidia", "*", "bin")))
        for name in ("cuobjdump", "nvdisasm"):
            disassembler = shutil.which(name) or next(
                (os.path.join(b, name) for b in bins
                 if os.access(os.path.join(b, name), os.X_OK)), None)
            if disassembler:
                break
    if disassembler and os.access(disassembler, os.X_OK):
        config.available_features.add("cuobjdump")
        config.environment["LLMC_CUOBJDUMP"] = disassembler
    else:
        lit_config.warning("cuobjdump not found: tests of inspect --kernels' SASS are skipped "
                           "(pip install nvidia-cuda-cuobjdump, or run scripts/setup)")
    # FileCheck variables do not leak between CHECK-LABEL blocks.
    config.substitutions.append(("FileCheck", "FileCheck --enable-var-scope"))
