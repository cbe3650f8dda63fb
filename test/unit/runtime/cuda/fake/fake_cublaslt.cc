// A fake libcublasLt for the wrapper's tests (cublaslt.h) on machines without
// a GPU: it exports the functions the wrapper resolves, with cuBLASLt's C ABI
// (declared here from cublasLt.h's documentation, not included), and runs
// cublasLtMatmul on the host: "device memory" is host memory, as in the fake
// driver (fake_libcuda.cc).
//
// cublasLtMatmul checks what the real library would refuse (the m/n/k of the
// layouts after TRANSA/TRANSB, ld >= rows, the types, an algorithm that came
// from the heuristic, pointers as aligned and a workspace as large as that
// algorithm was chosen for) and computes D = alpha op(A) op(B) + beta C in
// column-major order with f32 accumulation, reading f16/bf16/f32 and writing
// D in its layout's type.
//
// The product runs as host work on the fake driver's stream when the fake
// driver is the process's (LLMC_CUDA_DRIVER names it and it is loaded): at
// once, or, while the driver captures a graph, when the graph is replayed,
// as the real library's kernels would. Without it, at once.
//
// FAKE_CUBLASLT_FAIL=matmul|heuristic|noalgo|create makes cublasLtMatmul
// fail (CUBLAS_STATUS_EXECUTION_FAILED), the heuristic fail
// (CUBLAS_STATUS_NOT_SUPPORTED) or find nothing, or cublasLtCreate fail
// (CUBLAS_STATUS_NOT_INITIALIZED). fake_cublaslt_control / _query set and
// read its state; tests reach them by dlopen'ing the same path.
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {
using Status = int;
constexpr Status kSuccess = 0, kNotInitialized = 1, kInvalidValue = 7, kExecutionFailed = 13,
                 kNotSupported = 15;
constexpr int kR32F = 0, kR16F = 2, kR16BF = 14;
constexpr int kCompute32F = 68;
constexpr uint64_t kAlgoMagic = 0x6c6c6d63616c676full;  // "llmcalgo"

struct Handle {
  int magic = 1;
};
struct Desc {
  int compute, scale;
  int32_t transa = 0, transb = 0;
};
struct Layout {
  int type;
  uint64_t rows, cols;
  int64_t ld;
};
struct Pref {
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};
struct Algo {
  uint64_t data[8];
};
struct HeuristicResult {
  Algo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};

struct State {
  long handles = 0, descs = 0, layouts = 0, prefs = 0;  // live
  long heuristic_calls = 0, matmul_calls = 0;
  long workspace_needed = 0;  // what the heuristic's algorithm asks for (at most the limit)
  long last_max_workspace = -1;
  long last_align[4] = {0, 0, 0, 0};
  long last_workspace_bytes = -1;
  long last_stream = 0;
} g;

bool FailIs(const char* what) {
  const char* v = std::getenv("FAKE_CUBLASLT_FAIL");
  return v && std::strcmp(v, what) == 0;
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) return uint16_t(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
  if (abs >= 0x477ff000) return uint16_t(sign | 0x7c00);  // rounds past 65504
  if (abs < 0x38800000) {  // subnormal half (or zero): round |f| * 2^24 to an integer
    float a;
    std::memcpy(&a, &abs, 4);
    float scaled = a * 16777216.0f;  // exact
    uint32_t q = uint32_t(scaled);
    float rest = scaled - float(q);
    if (rest > 0.5f || (rest == 0.5f && (q & 1))) ++q;
    return uint16_t(sign | q);
  }
  uint32_t m = abs - (uint32_t(127 - 15) << 23);  // rebias
  uint32_t round = 0xfff + ((m >> 13) & 1);
  return uint16_t(sign | ((m + round) >> 13));
}
float Bf16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
float Load(const void* p, int type, size_t i) {
  switch (type) {
    case kR32F: return static_cast<const float*>(p)[i];
    case kR16F: return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    default: return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
}
void Store(void* p, int type, size_t i, float v) {
  switch (type) {
    case kR32F: static_cast<float*>(p)[i] = v; break;
    case kR16F: static_cast<uint16_t*>(p)[i] = FloatToHalf(v); break;
    default: static_cast<uint16_t*>(p)[i] = FloatToBf16(v); break;
  }
}
bool KnownType(int t) { return t == kR32F || t == kR16F || t == kR16BF; }
bool Aligned(const void* p, uint64_t bytes) { return uintptr_t(p) % bytes == 0; }
}  // namespace

#define API extern "C" __attribute__((visibility("default")))

// --- Test controls -------------------------------------------------------------
API void fake_cublaslt_control(const char* key, long value) {
  std::string k = key;
  if (k == "reset") {
    State fresh;
    fresh.handles = g.handles, fresh.descs = g.descs, fresh.layouts = g.layouts,
    fresh.prefs = g.prefs;  // live objects stay counted
    g = fresh;
  } else if (k == "workspace_needed") {
    g.workspace_needed = value;
  }
}
API long fake_cublaslt_query(const char* key) {
  std::string k = key;
  if (k == "handles") return g.handles;
  if (k == "descs") return g.descs;
  if (k == "layouts") return g.layouts;
  if (k == "prefs") return g.prefs;
  if (k == "heuristic_calls") return g.heuristic_calls;
  if (k == "matmul_calls") return g.matmul_calls;
  if (k == "last_max_workspace") return g.last_max_workspace;
  if (k == "last_align_a") return g.last_align[0];
  if (k == "last_align_b") return g.last_align[1];
  if (k == "last_align_c") return g.last_align[2];
  if (k == "last_align_d") return g.last_align[3];
  if (k == "last_workspace_bytes") return g.last_workspace_bytes;
  if (k == "last_stream") return g.last_stream;
  return -1;
}
API long fake_cublaslt_heuristic_calls() { return g.heuristic_calls; }

// --- cuBLASLt ------------------------------------------------------------------
API size_t cublasLtGetVersion() { return 130002; }  // 13.0.2
API const char* cublasLtGetStatusName(Status s) {
  switch (s) {
    case kSuccess: return "CUBLAS_STATUS_SUCCESS";
    case kNotInitialized: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case kInvalidValue: return "CUBLAS_STATUS_INVALID_VALUE";
    case kExecutionFailed: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case kNotSupported: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "<unknown>";
}
API const char* cublasLtGetStatusString(Status s) {
  switch (s) {
    case kSuccess: return "success";
    case kNotInitialized: return "the library was not initialized";
    case kInvalidValue: return "an invalid value was used as an argument";
    case kExecutionFailed: return "the GPU program failed to execute";
    case kNotSupported: return "the functionality requested is not supported";
  }
  return "<unknown>";
}

API Status cublasLtCreate(Handle** h) {
  if (!h) return kInvalidValue;
  if (FailIs("create")) return kNotInitialized;
  *h = new Handle;
  ++g.handles;
  return kSuccess;
}
API Status cublasLtDestroy(Handle* h) {
  if (!h) return kNotInitialized;
  delete h;
  --g.handles;
  return kSuccess;
}

API Status cublasLtMatmulDescCreate(Desc** d, int compute, int scale) {
  if (!d) return kInvalidValue;
  *d = new Desc{compute, scale};
  ++g.descs;
  return kSuccess;
}
API Status cublasLtMatmulDescDestroy(Desc* d) {
  delete d;
  --g.descs;
  return kSuccess;
}
API Status cublasLtMatmulDescSetAttribute(Desc* d, int attr, const void* buf, size_t size) {
  if (!d || !buf) return kInvalidValue;
  switch (attr) {
    case 0:  // COMPUTE_TYPE
    case 1:  // SCALE_TYPE
    case 3:  // TRANSA
    case 4:  // TRANSB
      if (size != 4) return kInvalidValue;
      break;
    default: return kNotSupported;  // the wrapper sets no other attribute
  }
  int32_t v;
  std::memcpy(&v, buf, 4);
  if (attr == 0) d->compute = v;
  if (attr == 1) d->scale = v;
  if ((attr == 3 || attr == 4) && v != 0 && v != 1) return kInvalidValue;
  if (attr == 3) d->transa = v;
  if (attr == 4) d->transb = v;
  return kSuccess;
}

API Status cublasLtMatrixLayoutCreate(Layout** l, int type, uint64_t rows, uint64_t cols,
                                      int64_t ld) {
  if (!l || !KnownType(type)) return kInvalidValue;
  *l = new Layout{type, rows, cols, ld};
  ++g.layouts;
  return kSuccess;
}
API Status cublasLtMatrixLayoutDestroy(Layout* l) {
  delete l;
  --g.layouts;
  return kSuccess;
}

API Status cublasLtMatmulPreferenceCreate(Pref** p) {
  if (!p) return kInvalidValue;
  *p = new Pref;
  ++g.prefs;
  return kSuccess;
}
API Status cublasLtMatmulPreferenceDestroy(Pref* p) {
  delete p;
  --g.prefs;
  return kSuccess;
}
API Status cublasLtMatmulPreferenceSetAttribute(Pref* p, int attr, const void* buf, size_t size) {
  if (!p || !buf) return kInvalidValue;
  if (attr == 1) {  // MAX_WORKSPACE_BYTES: uint64_t
    if (size != 8) return kInvalidValue;
    std::memcpy(&p->max_workspace, buf, 8);
    return kSuccess;
  }
  if (attr >= 5 && attr <= 8) {  // MIN_ALIGNMENT_{A,B,C,D}_BYTES: uint32_t
    if (size != 4) return kInvalidValue;
    std::memcpy(&p->align[attr - 5], buf, 4);
    return kSuccess;
  }
  return kNotSupported;
}

API Status cublasLtMatmulAlgoGetHeuristic(Handle* h, Desc* desc, Layout* a, Layout* b, Layout* c,
                                          Layout* d, Pref* pref, int requested,
                                          HeuristicResult* results, int* count) {
  if (!h) return kNotInitialized;
  if (!desc || !a || !b || !c || !d || !pref || requested <= 0 || !results || !count)
    return kInvalidValue;
  ++g.heuristic_calls;
  g.last_max_workspace = long(pref->max_workspace);
  for (int i = 0; i < 4; ++i) g.last_align[i] = pref->align[i];
  if (FailIs("heuristic")) return kNotSupported;
  *count = 0;
  if (FailIs("noalgo")) return kSuccess;
  std::memset(results, 0, sizeof *results);
  uint64_t needed = uint64_t(g.workspace_needed);
  if (needed > pref->max_workspace) needed = pref->max_workspace;
  // The algorithm remembers what it was chosen for: matmul checks it.
  results->algo.data[0] = kAlgoMagic;
  results->algo.data[1] = needed;
  for (int i = 0; i < 4; ++i) results->algo.data[2 + i] = pref->align[i];
  results->workspaceSize = needed;
  results->state = kSuccess;
  results->wavesCount = 1.0f;
  *count = 1;
  return kSuccess;
}

namespace {
// One cublasLtMatmul's work, by value (it may run later, from a graph).
struct Product {
  Desc desc;
  Layout la, lb, lc, ld;
  const void *A, *B, *C;
  void* D;
  uint64_t m, n, k;
  float alpha, beta;
};

void RunProduct(const void* ctx) {
  const Product& q = *static_cast<const Product*>(ctx);
  for (uint64_t j = 0; j < q.n; ++j) {
    for (uint64_t i = 0; i < q.m; ++i) {
      float acc = 0.0f;
      for (uint64_t p = 0; p < q.k; ++p) {
        // op(A)[i,p], op(B)[p,j], column-major with ld.
        size_t ia = q.desc.transa ? size_t(p + i * uint64_t(q.la.ld)) : size_t(i + p * uint64_t(q.la.ld));
        size_t ib = q.desc.transb ? size_t(j + p * uint64_t(q.lb.ld)) : size_t(p + j * uint64_t(q.lb.ld));
        acc += Load(q.A, q.la.type, ia) * Load(q.B, q.lb.type, ib);
      }
      float out = q.alpha * acc;
      if (q.beta != 0.0f) out += q.beta * Load(q.C, q.lc.type, size_t(i + j * uint64_t(q.lc.ld)));
      Store(q.D, q.ld.type, size_t(i + j * uint64_t(q.ld.ld)), out);
    }
  }
}
}  // namespace

API Status cublasLtMatmul(Handle* h, Desc* desc, const void* alpha, const void* A, Layout* la,
                          const void* B, Layout* lb, const void* beta, const void* C, Layout* lc,
                          void* D, Layout* ld, const Algo* algo, void* workspace,
                          size_t workspace_bytes, void* stream) {
  if (!h) return kNotInitialized;
  ++g.matmul_calls;
  g.last_workspace_bytes = long(workspace_bytes);
  g.last_stream = long(uintptr_t(stream));
  if (!desc || !alpha || !beta || !A || !B || !D || !la || !lb || !lc || !ld)
    return kInvalidValue;
  if (desc->compute != kCompute32F || desc->scale != kR32F) return kNotSupported;
  if (!algo || algo->data[0] != kAlgoMagic) return kInvalidValue;
  if (workspace_bytes < algo->data[1] || (workspace_bytes && !workspace)) return kInvalidValue;
  const uint64_t m = desc->transa ? la->cols : la->rows;
  const uint64_t k = desc->transa ? la->rows : la->cols;
  const uint64_t kb = desc->transb ? lb->cols : lb->rows;
  const uint64_t n = desc->transb ? lb->rows : lb->cols;
  if (k != kb || lc->rows != m || lc->cols != n || ld->rows != m || ld->cols != n)
    return kInvalidValue;
  for (const Layout* l : {la, lb, lc, ld})
    if (l->ld < int64_t(l->rows) || l->rows == 0 || l->cols == 0) return kInvalidValue;
  if (la->type != lb->type || lc->type != ld->type) return kNotSupported;
  if (ld->type != kR32F && ld->type != la->type) return kNotSupported;
  if (!Aligned(A, algo->data[2]) || !Aligned(B, algo->data[3]) || !Aligned(D, algo->data[5]) ||
      (C && !Aligned(C, algo->data[4])))
    return kInvalidValue;
  if (FailIs("matmul")) return kExecutionFailed;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  if (be != 0.0f && !C) return kInvalidValue;
  const Product p{*desc, *la, *lb, *lc, *ld, A, B, C, D, m, n, k, al, be};
  // The fake driver's stream, when the fake driver is loaded.
  using Enqueue = int (*)(void (*)(const void*), const void*, unsigned long);
  static Enqueue enqueue = [] {
    const char* driver = std::getenv("LLMC_CUDA_DRIVER");
    void* lib = driver ? dlopen(driver, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    return lib ? reinterpret_cast<Enqueue>(dlsym(lib, "fake_cuda_enqueue_host")) : nullptr;
  }();
  if (enqueue)
    enqueue(&RunProduct, &p, sizeof p);
  else
    RunProduct(&p);
  return kSuccess;
}
