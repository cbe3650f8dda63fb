#include "cuda_tools.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace llmc::cli {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool IsExecutable(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0;
}

std::string OnPath(const std::string& name) {
  for (absl::string_view dir : absl::StrSplit(Env("PATH"), ':', absl::SkipEmpty()))
    if (std::string p = absl::StrCat(dir, "/", name); IsExecutable(p)) return p;
  return "";
}

// The toolkit root NVRTCCompiler.cpp's toolkitRoot() picks (less the
// build-time root, which the runtime does not know).
std::string ToolkitRoot() {
  for (const std::string& c :
       {Env("LLMC_CUDA_HOME"), Env("CUDA_HOME"), Env("CUDA_PATH"), std::string("/usr/local/cuda")})
    if (Exists(c)) return c;
  return "";
}

// The bin/ folders of pip's NVIDIA packages (site-packages/nvidia/cu13/bin
// and the like), asking python3 where its site-packages are.
std::vector<std::string> PipNvidiaBins() {
  std::vector<std::string> bins;
  std::string python = OnPath("python3");
  if (python.empty()) return bins;
  auto r = RunProcess({python, "-c",
                       "import site, sysconfig\n"
                       "dirs = site.getsitepackages() + [site.getusersitepackages()]\n"
                       "dirs.append(sysconfig.get_paths()['purelib'])\n"
                       "print('\\n'.join(dirs))\n"});
  if (!r.ok() || r->exit_code != 0) return bins;
  std::error_code ec;
  for (absl::string_view dir : absl::StrSplit(r->out, '\n', absl::SkipEmpty())) {
    std::filesystem::path nvidia = std::filesystem::path(std::string(dir)) / "nvidia";
    if (!std::filesystem::is_directory(nvidia, ec)) continue;
    // increment(ec), not ++: the error_code forms never throw.
    for (std::filesystem::directory_iterator it(nvidia, ec), end; !ec && it != end; it.increment(ec))
      if (std::error_code bin_ec; std::filesystem::is_directory(it->path() / "bin", bin_ec))
        bins.push_back((it->path() / "bin").string());
  }
  return bins;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A folder under $TMPDIR (or /tmp) removed when this goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::string base = Env("TMPDIR").empty() ? "/tmp" : Env("TMPDIR");
    std::string templ = base + "/llmc-sass-XXXXXX";
    if (::mkdtemp(templ.data()) != nullptr) path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// "ptxas -arch=sm_90 failed (exit 255): <its stderr>", the message trimmed.
absl::Status ToolFailed(const std::vector<std::string>& argv, const ProcessOutput& r) {
  std::string name = std::filesystem::path(argv[0]).filename().string();
  std::string msg = r.err.empty() ? r.out : r.err;
  if (msg.size() > 2000) msg = msg.substr(0, 2000) + "...";
  return absl::InternalError(absl::StrCat(name, " failed (exit ", r.exit_code, ")",
                                          msg.empty() ? "" : ": ",
                                          absl::StripTrailingAsciiWhitespace(msg)));
}

}  // namespace

CudaTools FindCudaTools() {
  CudaTools t;
  std::string root = ToolkitRoot();
  // Where to look after $LLMC_* and PATH: the toolkit's bin/, then pip's
  // (python3 starts once, and only when needed).
  std::vector<std::string> dirs;
  if (!root.empty()) dirs.push_back(root + "/bin");
  bool pip_searched = false;
  auto find = [&](const std::string& name) {
    if (std::string p = OnPath(name); !p.empty()) return p;
    for (size_t pass = 0; pass < 2; ++pass) {
      for (const std::string& d : dirs)
        if (IsExecutable(d + "/" + name)) return d + "/" + name;
      if (pip_searched) break;
      pip_searched = true;
      for (std::string& bin : PipNvidiaBins()) dirs.push_back(std::move(bin));
    }
    return std::string();
  };

  // The toolkit's own ptxas before PATH's: the one the compiler checked
  // the PTX with.
  if (std::string p = Env("LLMC_PTXAS"); IsExecutable(p))
    t.ptxas = p;
  else if (IsExecutable(root + "/bin/ptxas"))
    t.ptxas = root + "/bin/ptxas";
  else
    t.ptxas = find("ptxas");
  if (t.ptxas.empty())
    t.ptxas_missing =
        "ptxas not found ($LLMC_PTXAS, $LLMC_CUDA_HOME, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, "
        "PATH, pip): pip install nvidia-cuda-nvcc";

  if (std::string explicit_tool = Env("LLMC_CUOBJDUMP"); !explicit_tool.empty()) {
    if (IsExecutable(explicit_tool)) {
      t.disassembler = explicit_tool;
      t.nvdisasm = std::filesystem::path(explicit_tool).filename() == "nvdisasm";
    } else {
      t.disassembler_missing = absl::StrCat("cuobjdump not found ($LLMC_CUOBJDUMP=", explicit_tool,
                                            " is no executable): pip install "
                                            "nvidia-cuda-cuobjdump");
    }
    return t;
  }
  for (const char* name : {"cuobjdump", "nvdisasm"}) {
    if (std::string found = find(name); !found.empty()) {
      t.disassembler = found;
      t.nvdisasm = std::string(name) == "nvdisasm";
      return t;
    }
  }
  t.disassembler_missing =
      "cuobjdump not found (nor nvdisasm: PATH, toolkit, pip's nvidia/*/bin): "
      "pip install nvidia-cuda-cuobjdump";
  return t;
}

absl::StatusOr<ProcessOutput> RunProcess(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("no program to run");
  TempDir tmp;
  if (tmp.path().empty())
    return absl::InternalError(absl::StrCat("cannot create a temporary folder: ", std::strerror(errno)));
  // Output to files, not pipes: no risk of a full pipe blocking the child
  // while this process waits on the other one.
  const std::string out_path = tmp.path() + "/stdout", err_path = tmp.path() + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", argv[0], ": ", std::strerror(rc)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return absl::InternalError(absl::StrCat("waiting for ", argv[0], ": ", std::strerror(errno)));
  ProcessOutput r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out_path);
  r.err = ReadFile(err_path);
  return r;
}

absl::StatusOr<std::string> DisassemblePtx(const CudaTools& tools, const std::string& ptx_path,
                                           const std::string& arch) {
  if (tools.ptxas.empty()) return absl::FailedPreconditionError(tools.ptxas_missing);
  if (tools.disassembler.empty()) return absl::FailedPreconditionError(tools.disassembler_missing);
  TempDir tmp;
  if (tmp.path().empty())
    return absl::InternalError(absl::StrCat("cannot create a temporary folder: ", std::strerror(errno)));
  const std::string cubin = tmp.path() + "/module.cubin";
  std::vector<std::string> ptxas = {tools.ptxas, "-arch=" + arch, "-O3", ptx_path, "-o", cubin};
  auto compiled = RunProcess(ptxas);
  if (!compiled.ok()) return compiled.status();
  if (compiled->exit_code != 0) return ToolFailed(ptxas, *compiled);
  std::vector<std::string> dump = tools.nvdisasm
                                      ? std::vector<std::string>{tools.disassembler, "-c", cubin}
                                      : std::vector<std::string>{tools.disassembler, "-sass", cubin};
  auto sass = RunProcess(dump);
  if (!sass.ok()) return sass.status();
  if (sass->exit_code != 0) return ToolFailed(dump, *sass);
  return std::move(sass->out);
}

}  // namespace llmc::cli
