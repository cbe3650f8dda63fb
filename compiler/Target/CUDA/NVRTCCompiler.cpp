//===- NVRTCCompiler.cpp - CUDA C++ -> PTX with NVRTC, checked by ptxas ---===//
#include "Target/CUDA/NVRTCCompiler.h"

#include "absl/strings/str_cat.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <dlfcn.h>
#include <optional>
#include <type_traits>
#include <unistd.h>
#include <regex>
#include <sstream>

#ifndef LLMC_CUDA_TOOLKIT_ROOT
#define LLMC_CUDA_TOOLKIT_ROOT ""
#endif

namespace llmc::cuda {
namespace {

// The few NVRTC entry points, declared here so that no CUDA header is needed
// at build time (the ABI has been stable since CUDA 7).
using nvrtcResult = int;
using nvrtcProgram = void *;
struct NvrtcApi {
  const char *(*GetErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int *, int *);
  nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                               const char *const *, const char *const *);
  nvrtcResult (*DestroyProgram)(nvrtcProgram *);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetPTX)(nvrtcProgram, char *);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
};

NvrtcApi api;

bool exists(const std::string &p) { return !p.empty() && llvm::sys::fs::exists(p); }

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string cacheDir(const CompileOptions &o) {
  if (!o.cache_dir.empty())
    return o.cache_dir;
  if (std::string d = env("LLMC_CACHE_DIR"); !d.empty())
    return d + "/cuda";
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty())
    return d + "/llmc/cuda";
  if (std::string d = env("HOME"); !d.empty())
    return d + "/.cache/llmc/cuda";
  return "";
}

absl::StatusOr<std::string> readFile(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", buf.getError().message()));
  return (*buf)->getBuffer().str();
}

// Writes to a temporary file beside `path`, then renames: concurrent
// compilers never see a half-written cache entry.
void writeAtomically(const std::string &path, const std::string &data) {
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  {
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      return;
    os << data;
  }
  if (llvm::sys::fs::rename(tmp, path))
    llvm::sys::fs::remove(tmp);
}

int toInt(const std::string &s) { return std::atoi(s.c_str()); }

} // namespace

std::string toolkitRoot() {
  for (const std::string &c : {env("LLMC_CUDA_HOME"), env("CUDA_HOME"), env("CUDA_PATH"),
                               std::string(LLMC_CUDA_TOOLKIT_ROOT), std::string("/usr/local/cuda")})
    if (exists(c))
      return c;
  return "";
}

const KernelResources *PtxasReport::find(const std::string &name) const {
  for (const KernelResources &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

PtxasReport parsePtxasReport(const std::string &log, const std::string &arch) {
  PtxasReport r;
  r.arch = arch;
  r.log = log;
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex regs(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  static const std::regex cmem(R"((\d+) bytes cmem\[0\])");
  std::istringstream in(log);
  std::string line;
  KernelResources *cur = nullptr;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      r.kernels.push_back(KernelResources{});
      cur = &r.kernels.back();
      cur->name = m[1];
      continue;
    }
    if (!cur)
      continue;
    if (std::regex_search(line, m, frame)) {
      cur->stack_bytes = toInt(m[1]);
      cur->spill_stores = toInt(m[2]);
      cur->spill_loads = toInt(m[3]);
    }
    if (std::regex_search(line, m, regs)) {
      cur->registers = toInt(m[1]);
      if (std::regex_search(line, m, smem))
        cur->shared_bytes = toInt(m[1]);
      if (std::regex_search(line, m, cmem))
        cur->const_bytes = toInt(m[1]);
    }
  }
  return r;
}

std::string formatReport(const PtxasReport &report) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0,-7} {1,-40} {2,5} {3,8} {4,8} {5,7} {6,6}\n", "arch", "kernel", "regs",
                      "spill_st", "spill_ld", "smem", "stack");
  for (const KernelResources &k : report.kernels)
    os << llvm::formatv("{0,-7} {1,-40} {2,5} {3,8} {4,8} {5,7} {6,6}\n", report.arch, k.name,
                        k.registers, k.spill_stores, k.spill_loads, k.shared_bytes,
                        k.stack_bytes);
  return out;
}

absl::StatusOr<NVRTCCompiler> NVRTCCompiler::create() {
  NVRTCCompiler c;
  c.root = toolkitRoot();
  std::vector<std::string> candidates;
  // $LLMC_NVRTC names the one library to use (nothing else is tried).
  if (std::string p = env("LLMC_NVRTC"); !p.empty())
    candidates.push_back(p);
  else if (!c.root.empty())
    for (const char *dir : {"/lib64/", "/lib/", "/targets/x86_64-linux/lib/"})
      for (const char *so : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"})
        candidates.push_back(c.root + dir + so);
  if (env("LLMC_NVRTC").empty())
    for (const char *so : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      candidates.push_back(so);
  std::string tried;
  for (const std::string &so : candidates) {
    if (so.find('/') != std::string::npos && !exists(so)) {
      tried += " " + so;
      continue;
    }
    c.lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (c.lib)
      break;
    tried += " " + so;
  }
  if (!c.lib)
    return absl::NotFoundError(
        absl::StrCat("no CUDA toolkit: cannot load libnvrtc (set LLMC_CUDA_HOME or LLMC_NVRTC); "
                     "tried",
                     tried.empty() ? " nothing" : tried));
  auto sym = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(c.lib, name));
    return fn != nullptr;
  };
  if (!sym(api.GetErrorString, "nvrtcGetErrorString") || !sym(api.Version, "nvrtcVersion") ||
      !sym(api.CreateProgram, "nvrtcCreateProgram") ||
      !sym(api.DestroyProgram, "nvrtcDestroyProgram") ||
      !sym(api.CompileProgram, "nvrtcCompileProgram") || !sym(api.GetPTXSize, "nvrtcGetPTXSize") ||
      !sym(api.GetPTX, "nvrtcGetPTX") || !sym(api.GetProgramLogSize, "nvrtcGetProgramLogSize") ||
      !sym(api.GetProgramLog, "nvrtcGetProgramLog"))
    return absl::FailedPreconditionError("libnvrtc lacks an expected entry point");
  api.Version(&c.major, &c.minor);

  if (std::string p = env("LLMC_PTXAS"); exists(p))
    c.ptxas = p;
  else if (exists(c.root + "/bin/ptxas"))
    c.ptxas = c.root + "/bin/ptxas";
  else if (auto p = llvm::sys::findProgramByName("ptxas"))
    c.ptxas = *p;
  return c;
}

std::string NVRTCCompiler::version() const { return absl::StrCat(major, ".", minor); }

absl::StatusOr<std::string> NVRTCCompiler::compileOne(const std::string &source,
                                                      const std::string &name,
                                                      const std::string &arch,
                                                      const CompileOptions &o) const {
  if (arch.rfind("sm_", 0) != 0)
    return absl::InvalidArgumentError(absl::StrCat("unknown CUDA architecture '", arch,
                                                   "' (expected sm_XX, e.g. sm_80)"));
  std::vector<std::string> opts = {"--gpu-architecture=compute_" + arch.substr(3), "-std=c++17",
                                   "--fmad=true"};
  if (!root.empty())
    opts.push_back("--include-path=" + root + "/include");
  for (const std::string &p : o.include_paths)
    opts.push_back("--include-path=" + p);
  for (const std::string &f : o.extra_flags)
    opts.push_back(f);

  // Cache key: everything that determines the PTX.
  llvm::SHA256 h;
  auto add = [&](llvm::StringRef s) {
    h.update(s);
    h.update(llvm::StringRef("\0", 1));
  };
  add("llmc-nvrtc-1");
  add(version());
  add(source);
  for (const auto &[n, text] : o.headers) {
    add(n);
    add(text);
  }
  for (const std::string &opt : opts)
    add(opt);
  // Included files found by path are part of the key too (the kernel library).
  for (const std::string &p : o.include_paths) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(p, ec), end; it != end && !ec; it.increment(ec)) {
      if (auto text = readFile(it->path()); text.ok()) {
        add(it->path());
        add(*text);
      }
    }
  }
  std::string key = llvm::toHex(h.final(), /*LowerCase=*/true);
  std::string dir = o.use_cache ? cacheDir(o) : "";
  std::string cached = dir.empty() ? "" : dir + "/" + key + ".ptx";
  if (!cached.empty() && exists(cached))
    if (auto text = readFile(cached); text.ok())
      return "//llmc-cache-hit\n" + *text;

  std::vector<const char *> hdrs, hdrNames, optPtrs;
  for (const auto &[n, text] : o.headers) {
    hdrNames.push_back(n.c_str());
    hdrs.push_back(text.c_str());
  }
  for (const std::string &opt : opts)
    optPtrs.push_back(opt.c_str());
  nvrtcProgram prog = nullptr;
  nvrtcResult rc = api.CreateProgram(&prog, source.c_str(), name.c_str(),
                                     static_cast<int>(hdrs.size()), hdrs.data(), hdrNames.data());
  if (rc != 0)
    return absl::InternalError(absl::StrCat("nvrtcCreateProgram: ", api.GetErrorString(rc)));
  rc = api.CompileProgram(prog, static_cast<int>(optPtrs.size()), optPtrs.data());
  size_t logSize = 0;
  api.GetProgramLogSize(prog, &logSize);
  std::string log(logSize, '\0');
  if (logSize)
    api.GetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();
  if (rc != 0) {
    api.DestroyProgram(&prog);
    return absl::InvalidArgumentError(absl::StrCat("NVRTC failed to compile ", name, " for ",
                                                   arch, " (", api.GetErrorString(rc), "):\n",
                                                   log));
  }
  size_t ptxSize = 0;
  api.GetPTXSize(prog, &ptxSize);
  std::string ptx(ptxSize, '\0');
  api.GetPTX(prog, ptx.data());
  api.DestroyProgram(&prog);
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  if (!cached.empty() && !llvm::sys::fs::create_directories(dir))
    writeAtomically(cached, ptx);
  return ptx;
}

absl::StatusOr<PtxasReport> NVRTCCompiler::runPtxas(const std::string &ptx,
                                                    const std::string &arch) const {
  if (ptxas.empty())
    return absl::NotFoundError("no ptxas found (set LLMC_CUDA_HOME or LLMC_PTXAS)");
  llvm::SmallString<128> in, out;
  if (llvm::sys::fs::createTemporaryFile("llmc", "ptx", in) ||
      llvm::sys::fs::createTemporaryFile("llmc-ptxas", "log", out))
    return absl::InternalError("cannot create a temporary file for ptxas");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(in, ec);
    os << ptx;
  }
  std::string inS(in.str()), outS(out.str());
  std::string archFlag = "-arch=" + arch;
  llvm::SmallVector<llvm::StringRef> args = {ptxas, archFlag, "-v", inS, "-o", "/dev/null"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(outS),
                                                llvm::StringRef(outS)};
  std::string err;
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0, &err);
  auto log = readFile(outS);
  llvm::sys::fs::remove(in);
  llvm::sys::fs::remove(out);
  std::string text = log.ok() ? *log : "";
  if (rc != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("ptxas -arch=", arch, " failed (", rc < 0 ? err : std::to_string(rc), "):\n",
                     text));
  return parsePtxasReport(text, arch);
}

absl::StatusOr<std::vector<CompiledPtx>> NVRTCCompiler::compile(const std::string &source,
                                                                const std::string &name,
                                                                const CompileOptions &o) const {
  std::vector<CompiledPtx> result;
  for (const std::string &arch : o.archs) {
    auto ptx = compileOne(source, name, arch, o);
    if (!ptx.ok())
      return ptx.status();
    CompiledPtx c;
    c.arch = arch;
    static const std::string kHit = "//llmc-cache-hit\n";
    if (ptx->rfind(kHit, 0) == 0) {
      c.from_cache = true;
      c.ptx = ptx->substr(kHit.size());
    } else {
      c.ptx = std::move(*ptx);
    }
    if (o.run_ptxas) {
      auto report = runPtxas(c.ptx, arch);
      if (!report.ok())
        return report.status();
      c.report = std::move(*report);
    }
    result.push_back(std::move(c));
  }
  return result;
}

} // namespace llmc::cuda
