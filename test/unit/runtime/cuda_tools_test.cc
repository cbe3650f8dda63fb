// The CUDA tool runner of `llmc inspect --kernels`, with fake tools (shell
// scripts) in a folder whose name has a space and shell metacharacters:
// arguments reach the tool as they are (no shell), a missing tool is a
// message, not a failure, and ptxas's output file is what the disassembler
// reads.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <optional>
#include <string>

#include "cli/cuda_tools.h"
#include "core/artifact/artifact_test_util.h"

namespace llmc::cli {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string Script(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(CudaTools, RunProcessPassesArgumentsVerbatim) {
  auto r = RunProcess({"/bin/sh", "-c", "printf '%s|' \"$@\"; echo oops >&2; exit 3", "sh",
                       "a b", "$(touch /tmp/llmc-injected)", "; rm -rf x"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "a b|$(touch /tmp/llmc-injected)|; rm -rf x|");
  EXPECT_EQ(r->err, "oops\n");
  EXPECT_FALSE(RunProcess({"/nonexistent/tool"}).ok());
  EXPECT_FALSE(RunProcess({}).ok());
}

TEST(CudaTools, MissingDisassemblerIsAMessage) {
  ScopedEnv env("LLMC_CUOBJDUMP", "/nonexistent/cuobjdump");
  CudaTools t = FindCudaTools();
  EXPECT_TRUE(t.disassembler.empty());
  EXPECT_NE(t.disassembler_missing.find("pip install nvidia-cuda-cuobjdump"), std::string::npos)
      << t.disassembler_missing;
  auto sass = DisassemblePtx(t, "/nonexistent.ptx", "sm_90");
  EXPECT_EQ(sass.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CudaTools, CompilesThenDisassembles) {
  test::TempFolder folder;
  std::string dir = folder.File("tools dir; $(x)");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  // ptxas: checks its flags and writes the cubin where -o says; cuobjdump
  // prints the cubin (its content proves it read ptxas's file).
  std::string ptxas = Script(dir + "/ptxas",
                             "[ \"$1\" = -arch=sm_90 ] && [ \"$2\" = -O3 ] || exit 9\n"
                             "[ \"$4\" = -o ] || exit 8\n"
                             "printf 'Function : k from %s\\n' \"$3\" > \"$5\"\n");
  std::string cuobjdump = Script(dir + "/cuobjdump", "[ \"$1\" = -sass ] || exit 7\ncat \"$2\"\n");
  ScopedEnv p("LLMC_PTXAS", ptxas);
  ScopedEnv c("LLMC_CUOBJDUMP", cuobjdump);
  CudaTools t = FindCudaTools();
  EXPECT_EQ(t.ptxas, ptxas);
  EXPECT_EQ(t.disassembler, cuobjdump);
  EXPECT_FALSE(t.nvdisasm);
  auto sass = DisassemblePtx(t, dir + "/my kernels.ptx", "sm_90");
  ASSERT_TRUE(sass.ok()) << sass.status();
  EXPECT_EQ(*sass, "Function : k from " + dir + "/my kernels.ptx\n");
  // A failing tool: its message and exit status.
  Script(ptxas, "echo 'ptxas fatal: bad PTX' >&2; exit 255\n");
  sass = DisassemblePtx(t, dir + "/my kernels.ptx", "sm_90");
  EXPECT_EQ(sass.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(sass.status().message(), "ptxas failed (exit 255): ptxas fatal: bad PTX");
}

}  // namespace
}  // namespace llmc::cli
