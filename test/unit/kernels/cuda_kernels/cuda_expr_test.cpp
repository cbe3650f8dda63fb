//===- cuda_expr_test.cpp - one expression emitter, two targets ----------===//
//
// The fused prologues and epilogues of both code generators are written by
// compiler/Target/Common/ExprEmitter. This test runs it once over a small
// elementwise function (SiLU, GELU tanh/erf, mul, add) and compiles the very
// same statements (a) inside a CUDA epilogue functor of the CUDA kernel
// library, with NVRTC for sm_80 and sm_90, checked by ptxas, and (b) inside a
// host kernel body over the host library's float and 8-lane vector types, with
// the system C++ compiler. So the shared emitter is tested once for both
// targets.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include "Target/Common/ExprEmitter.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace llmc::cuda::test {
namespace {

constexpr const char *kIR = R"mlir(
func.func @epi(%acc: tensor<?x64xf32>, %up: tensor<?x64xf32>, %res: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %s = llm.silu %acc : tensor<?x64xf32>
  %m = llm.mul %s, %up : tensor<?x64xf32>
  %g = llm.gelu %m approx = tanh : tensor<?x64xf32>
  %e = llm.gelu %g approx = erf : tensor<?x64xf32>
  %a = llm.add %e, %res : tensor<?x64xf32>
  %b = llm.mul %a, %a : tensor<?x64xf32>
  return %b : tensor<?x64xf32>
}
)mlir";

// Runs ExprEmitter over @epi with its arguments bound to t0, t1, t2; returns
// the statements and the name of the returned value.
std::pair<std::string, std::string> emitStatements(MLIRContext &ctx) {
  ctx.loadDialect<llm::LLMDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kIR, &ctx);
  EXPECT_TRUE(module);
  if (!module)
    return {};
  auto fn = *module->getOps<func::FuncOp>().begin();
  ExprEmitter ex;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    ex.bind(fn.getArgument(i), "t" + std::to_string(i));
  std::string text;
  llvm::raw_string_ostream os(text);
  std::string result;
  for (Operation &op : fn.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      result = ex.lookup(ret.getOperand(0));
      continue;
    }
    EXPECT_TRUE(succeeded(ex.emit(&op, os, "    "))) << op.getName().getStringRef().str();
  }
  return {text, result};
}

TEST(SharedExprEmitter, StatementsCompileForCuda) {
  MLIRContext ctx;
  auto [stmts, result] = emitStatements(ctx);
  ASSERT_FALSE(stmts.empty());
  EXPECT_NE(stmts.find("llmc::expr::silu(t0)"), std::string::npos) << stmts;
  EXPECT_NE(stmts.find("llmc::expr::gelu_tanh("), std::string::npos) << stmts;
  EXPECT_NE(stmts.find("llmc::expr::gelu_erf("), std::string::npos) << stmts;

  // The epilogue functor a CUDA emitter writes for a paired gate/up GEMV with
  // a residual input: acc[0] = gate, acc[1] = up.
  std::string src = R"(#include "llmc_cuda_kernels.cuh"
using namespace llmc::cuda;
template <class A, int N> struct generated_epilogue {
  static constexpr int kRows = 2;
  const A* res; A* y;
  __device__ static int row(int n, int p) { return n + p * N; }
  __device__ void operator()(int t, int n, const float (&acc)[2]) const {
    const float t0 = acc[0];
    const float t1 = acc[1];
    const float t2 = to_float(res[(long long)t * N + n]);
)" + stmts + "    y[(long long)t * N + n] = from_float<A>(" +
                    result + R"();
  }
};
template <class A> __device__ void body(int T, const A* x, const void* w, const A* r, A* y) {
  gemv<fmt::q4_1, 64, 256, 4, 4, A>(T, nullptr, x, w, no_prologue{}, generated_epilogue<A, 64>{r, y});
}
extern "C" __global__ void __launch_bounds__(128, 4) epi_f32(int T, const float* x, const void* w, const float* r, float* y) { body(T, x, w, r, y); }
extern "C" __global__ void __launch_bounds__(128, 4) epi_f16(int T, const __half* x, const void* w, const __half* r, __half* y) { body(T, x, w, r, y); }
extern "C" __global__ void __launch_bounds__(128, 4) epi_bf16(int T, const __nv_bfloat16* x, const void* w, const __nv_bfloat16* r, __nv_bfloat16* y) { body(T, x, w, r, y); }
extern "C" __global__ void __launch_bounds__(128, 4) epi_mma_f16(int T, const __half* x, const void* w, const __half* r, __half* y) {
  gemm_mma<fmt::q8_0, 64, 256, __half, gemm_tile<64, 64, 2, 2, 4>>(T, nullptr, x, w, generated_epilogue<__half, 64>{r, y});
}
)";
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("llmc-cuda-expr", dir));
  auto out = compiler()->compile(src, "expr.cu", kernelLibraryOptions(std::string(dir.str())));
  llvm::sys::fs::remove_directories(dir);
  ASSERT_TRUE(out.ok()) << out.status().message() << "\n--- source:\n" << src;
  for (const CompiledPtx &p : *out) {
    std::printf("%s", formatReport(p.report).c_str());
    ASSERT_EQ(p.report.kernels.size(), 4u) << p.report.log;
    for (const KernelResources &k : p.report.kernels) {
      if (k.name.rfind("epi_mma", 0) != 0)
        EXPECT_FALSE(k.hasSpills()) << p.arch << " " << k.name;
    }
  }
}

// The same statements over the host library's lane types (float and its
// 8-lane vector), compiled by the system C++ compiler (syntax and types only).
TEST(SharedExprEmitter, SameStatementsCompileForHost) {
  MLIRContext ctx;
  auto [stmts, result] = emitStatements(ctx);
  ASSERT_FALSE(stmts.empty());
  std::string src = R"(#include "llmc_host_kernels.h"
template <class V> V body(V t0, V t1, V t2) {
)" + stmts + "    return " +
                    result + R"(;
}
template float body<float>(float, float, float);
void one(const float* a, float* y) {
  using L = llmc::host::lanes1;
  L::store(y, body(L::load(a), L::load(a + 1), L::load(a + 2)));
}
#if LLMC_HOST_SIMD
void vec(const float* a, float* y) {
  using L = llmc::host::lanes8;
  L::store(y, body(L::load(a), L::load(a + 8), L::load(a + 16)));
}
#endif
)";
  llvm::SmallString<128> path;
  int fd;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("llmc-expr-host", "cpp", fd, path));
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << src;
  }
  std::string cxx = LLMC_CXX_COMPILER;
  std::vector<llvm::StringRef> args = {cxx, "-std=c++17", "-fsyntax-only", "-march=x86-64-v3",
                                       "-I" LLMC_HOST_KERNELS_DIR, "-I" LLMC_HOST_ABI_DIR,
                                       "-I" LLMC_BLOCK_DECODE_DIR, path.str()};
  std::string err;
  int rc = llvm::sys::ExecuteAndWait(cxx, args, std::nullopt, {}, 0, 0, &err);
  llvm::sys::fs::remove(path);
  EXPECT_EQ(rc, 0) << err << "\n--- source:\n" << src;
}

} // namespace
} // namespace llmc::cuda::test
