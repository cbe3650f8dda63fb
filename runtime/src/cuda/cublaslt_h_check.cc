// When the toolkit's cublasLt.h is found at build time: cublaslt.h's
// declarations against it (values, struct layouts, and every resolved
// function's signature, parameter by parameter, as the C ABI passes it).
// Nothing of cublasLt.h is called; the functions come from dlsym
// (cublaslt.cc). Without the header this file compiles to nothing.
#include "llmc/runtime/cuda/cublaslt.h"

#ifdef LLMC_HAVE_CUBLASLT_H
#include <cublasLt.h>

#include <cstddef>
#include <type_traits>

namespace {
namespace c = llmc::cuda;

// Values.
static_assert(sizeof(::cublasStatus_t) == sizeof(c::cublasStatus_t));
static_assert(sizeof(::cublasComputeType_t) == sizeof(c::cublasComputeType_t));
static_assert(sizeof(::cudaDataType_t) == sizeof(c::cudaDataType_t));
static_assert(sizeof(::cublasOperation_t) == sizeof(int32_t));
static_assert(sizeof(::cublasLtMatmulDescAttributes_t) == sizeof(c::cublasLtMatmulDescAttributes_t));
static_assert(sizeof(::cublasLtMatmulPreferenceAttributes_t) ==
              sizeof(c::cublasLtMatmulPreferenceAttributes_t));
static_assert(::CUBLAS_STATUS_SUCCESS == c::kCublasStatusSuccess);
static_assert(::CUBLAS_STATUS_NOT_INITIALIZED == c::kCublasStatusNotInitialized);
static_assert(::CUBLAS_STATUS_ALLOC_FAILED == c::kCublasStatusAllocFailed);
static_assert(::CUBLAS_STATUS_INVALID_VALUE == c::kCublasStatusInvalidValue);
static_assert(::CUBLAS_STATUS_ARCH_MISMATCH == c::kCublasStatusArchMismatch);
static_assert(::CUBLAS_STATUS_MAPPING_ERROR == c::kCublasStatusMappingError);
static_assert(::CUBLAS_STATUS_EXECUTION_FAILED == c::kCublasStatusExecutionFailed);
static_assert(::CUBLAS_STATUS_INTERNAL_ERROR == c::kCublasStatusInternalError);
static_assert(::CUBLAS_STATUS_NOT_SUPPORTED == c::kCublasStatusNotSupported);
static_assert(::CUBLAS_STATUS_LICENSE_ERROR == c::kCublasStatusLicenseError);
static_assert(::CUDA_R_32F == c::kCudaR32F);
static_assert(::CUDA_R_16F == c::kCudaR16F);
static_assert(::CUDA_R_16BF == c::kCudaR16BF);
static_assert(::CUBLAS_COMPUTE_32F == c::kCublasCompute32F);
static_assert(::CUBLAS_OP_N == c::kCublasOpN);
static_assert(::CUBLAS_OP_T == c::kCublasOpT);
static_assert(::CUBLASLT_MATMUL_DESC_TRANSA == c::kCublasLtMatmulDescTransA);
static_assert(::CUBLASLT_MATMUL_DESC_TRANSB == c::kCublasLtMatmulDescTransB);
static_assert(::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES == c::kCublasLtPrefMaxWorkspaceBytes);
static_assert(::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES == c::kCublasLtPrefMinAlignmentABytes);
static_assert(::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES == c::kCublasLtPrefMinAlignmentBBytes);
static_assert(::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES == c::kCublasLtPrefMinAlignmentCBytes);
static_assert(::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES == c::kCublasLtPrefMinAlignmentDBytes);

// Structs the wrapper reads or passes by address.
static_assert(sizeof(::cublasLtMatmulAlgo_t) == sizeof(c::cublasLtMatmulAlgo_t));
static_assert(alignof(::cublasLtMatmulAlgo_t) == alignof(c::cublasLtMatmulAlgo_t));
static_assert(sizeof(::cublasLtMatmulHeuristicResult_t) ==
              sizeof(c::cublasLtMatmulHeuristicResult_t));
static_assert(alignof(::cublasLtMatmulHeuristicResult_t) ==
              alignof(c::cublasLtMatmulHeuristicResult_t));
#define LLMC_SAME_OFFSET(field)                                        \
  static_assert(offsetof(::cublasLtMatmulHeuristicResult_t, field) == \
                offsetof(c::cublasLtMatmulHeuristicResult_t, field))
LLMC_SAME_OFFSET(algo);
LLMC_SAME_OFFSET(workspaceSize);
LLMC_SAME_OFFSET(state);
LLMC_SAME_OFFSET(wavesCount);
LLMC_SAME_OFFSET(reserved);
#undef LLMC_SAME_OFFSET

// Signatures: the same arity, and each parameter (and the result) passed
// alike: the same type, two pointers (the opaque descriptors are
// different types here, pointers all the same), or two integers or enums
// of one size. The pointees the wrapper reads are checked above.
template <class A, class B>
constexpr bool PassedAlike() {
  if constexpr (std::is_same_v<A, B>) {
    return true;
  } else if constexpr (std::is_pointer_v<A> && std::is_pointer_v<B>) {
    return std::is_const_v<std::remove_pointer_t<A>> == std::is_const_v<std::remove_pointer_t<B>>;
  } else if constexpr ((std::is_integral_v<A> || std::is_enum_v<A>) &&
                       (std::is_integral_v<B> || std::is_enum_v<B>)) {
    return sizeof(A) == sizeof(B) && std::is_signed_v<std::conditional_t<
                                         std::is_enum_v<A>, int, A>> ==
                                         std::is_signed_v<std::conditional_t<std::is_enum_v<B>, int, B>>;
  } else {
    return false;
  }
}
template <class F, class G>
struct SameAbi : std::false_type {};
template <class R1, class... A1, class R2, class... A2>
struct SameAbi<R1 (*)(A1...), R2 (*)(A2...)> {
  static constexpr bool value = [] {
    if constexpr (sizeof...(A1) != sizeof...(A2)) {
      return false;
    } else {
      return PassedAlike<R1, R2>() && (PassedAlike<A1, A2>() && ...);
    }
  }();
};
}  // namespace

// Inside llmc::cuda, the table's type names are cublaslt.h's; &::name is
// cublasLt.h's function.
namespace llmc::cuda {
namespace {
#define LLMC_CHECK_SIGNATURE(name, ret, params, required)          \
  static_assert(SameAbi<ret(*) params, decltype(&::name)>::value, \
                #name ": the declared signature differs from cublasLt.h's");
LLMC_CUBLASLT_FUNCTIONS(LLMC_CHECK_SIGNATURE)
#undef LLMC_CHECK_SIGNATURE
}  // namespace
}  // namespace llmc::cuda
#endif
