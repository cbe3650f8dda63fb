// A fake libnccl for the CUDA executor's tensor parallelism on machines
// without GPUs: it exports the functions nccl_api.h resolves, with NCCL's C
// ABI (declared here from nccl.h's documentation, not included), and runs
// the collectives over MPI between the ranks mpirun started, on the fake
// driver's "device memory" (host memory, fake_libcuda.cc).
//
// Ordering: a collective is host work on the fake driver's stream
// (fake_cuda_enqueue_host, found through $LLMC_CUDA_DRIVER as the fake
// cuBLASLt finds it): it runs at once, or, while the driver captures a
// graph, each time the graph is replayed, as NCCL's kernels would.
//
// Like the fake driver, it refuses misuse loudly (stderr, and the NCCL error
// the real library would give, with ncclGetLastError's text):
//   - ncclCommInitRank outside an MPI world, with a unique id that not
//     exactly `nranks` ranks of the world got (rank 0's, broadcast: checked
//     by gathering every world rank's), or a rank that is not its place in
//     the comm. The ranks with one id form a comm of their own: the whole
//     world, or a pipeline stage's tensor-parallel group (every world rank
//     inits at once, as the runtime's do at load);
//   - a collective on a comm that is not one (or destroyed, or aborted), of a
//     type other than f16/bf16/f32 (all llmc moves), an op other than sum, a
//     count of 0, a null pointer, a buffer that does not lie within one fake
//     device allocation for count elements, an all-gather whose input
//     overlaps its output;
//   - and, when the collective runs, ranks that disagree on the collective,
//     the type or the count (the comm then holds ncclInvalidUsage as its
//     asynchronous error, and the output is left alone).
// Sums are computed in float in rank order and rounded once to the type
// (round to nearest even), the same on every rank.
//
// FAKE_NCCL_LOG=PREFIX: each rank appends to PREFIX.rank<R> a line per
// collective call ("call all_reduce bf16 1792") and per collective that runs
// ("run all_gather f32 151"; a graph's are run at each replay, called
// once), and "init 2 0", "destroy", "abort", so tests check what the runner
// asked for.
// FAKE_NCCL_FAIL=MODE:RANK:N: on rank RANK, the N-th collective call (from 1)
// fails: "error" returns ncclInternalError from the call; "async" takes no
// part and sets ncclRemoteError as the comm's asynchronous error; "hang"
// takes no part and leaves the driver's stream stuck ("stream_stuck"), as a
// collective whose peer never comes.
// FAKE_NCCL_TIMEOUT=S (default 120): a rank waiting longer for its peers in
// MPI gives up with ncclRemoteError as the asynchronous error.
// FAKE_NCCL_VERSION=N: what ncclGetVersion says (a library too old).
#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {
using Result = int;
constexpr Result kSuccess = 0, kSystemError = 2, kInternalError = 3, kInvalidArgument = 4,
                 kInvalidUsage = 5, kRemoteError = 6;
constexpr int kFloat16 = 6, kFloat32 = 7, kBfloat16 = 9;
constexpr int kSum = 0;
constexpr int kVersion = 22800;                         // "2.28.0"
constexpr uint64_t kIdMagic = 0x6c6c6d636e63636cull;    // "llmcnccl"
constexpr uint64_t kCommMagic = 0x636f6d6d6e63636cull;  // "commnccl"

struct UniqueId {
  char internal[128];
};

struct Comm {
  uint64_t magic = kCommMagic;
  int nranks = 0, rank = 0;
  MPI_Comm mpi = MPI_COMM_NULL;
  Result async_error = kSuccess;
  bool aborted = false;
  FILE* log = nullptr;
  long calls = 0;  // collective calls made (enqueued or refused)
};

std::string g_last_error;

Result Fail(Result r, const char* fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  g_last_error = std::string("fake NCCL: ") + text;
  std::fprintf(stderr, "%s\n", g_last_error.c_str());
  return r;
}

void Log(Comm* c, const char* fmt, ...) {
  if (!c->log) return;
  va_list args;
  va_start(args, fmt);
  std::vfprintf(c->log, fmt, args);
  va_end(args);
  std::fputc('\n', c->log);
  std::fflush(c->log);
}

const char* TypeName(int t) {
  switch (t) {
    case kFloat16:
      return "f16";
    case kFloat32:
      return "f32";
    case kBfloat16:
      return "bf16";
  }
  return nullptr;
}
size_t TypeBytes(int t) { return t == kFloat32 ? 4 : 2; }

float Bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}
float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | uint32_t(exp + 127 - 15) << 23 | (mant & 0x3ffu) << 13;
    }
  } else {
    bits = sign | uint32_t(exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504: infinity
  if (abs < 0x38800000u) {                                  // below 2^-14: subnormal or zero
    // The value in units of 2^-24, rounded to nearest even.
    float scaled;
    float a;
    std::memcpy(&a, &abs, 4);
    scaled = a * 16777216.0f;  // exact: a power of two
    uint32_t n = uint32_t(scaled);
    float rest = scaled - float(n);
    if (rest > 0.5f || (rest == 0.5f && (n & 1u))) ++n;
    return uint16_t(sign | n);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);  // rebias 127 -> 15
  const uint32_t low = abs & 0x1fffu;
  if (low > 0x1000u || (low == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

float Load(const void* p, int type, size_t i) {
  switch (type) {
    case kFloat32:
      return static_cast<const float*>(p)[i];
    case kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    default:
      return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
}
void Store(void* p, int type, size_t i, float v) {
  switch (type) {
    case kFloat32:
      static_cast<float*>(p)[i] = v;
      break;
    case kFloat16:
      static_cast<uint16_t*>(p)[i] = FloatToHalf(v);
      break;
    default:
      static_cast<uint16_t*>(p)[i] = FloatToBf16(v);
      break;
  }
}

// The fake driver's exports, when it is the process's driver.
template <typename Fn>
Fn DriverSymbol(const char* name) {
  const char* driver = std::getenv("LLMC_CUDA_DRIVER");
  void* lib = driver ? dlopen(driver, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return lib ? reinterpret_cast<Fn>(dlsym(lib, name)) : nullptr;
}
using Enqueue = int (*)(void (*)(const void*), const void*, unsigned long);
using Control = void (*)(const char*, long);
using DeviceBytes = long long (*)(unsigned long long);

double Timeout() {
  const char* t = std::getenv("FAKE_NCCL_TIMEOUT");
  double s = t ? std::atof(t) : 0;
  return s > 0 ? s : 120;
}

// Waits for `request` with the fake's deadline; false past it.
bool Wait(MPI_Request* request) {
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    if (MPI_Test(request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    if (waited.count() > Timeout()) return false;
    if (polls > 100) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Every rank's `bytes` at `in`, in rank order, into `out`; false on failure.
bool Gather(Comm* c, const void* in, void* out, size_t bytes) {
  MPI_Request request;
  if (MPI_Iallgather(in, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, c->mpi, &request) !=
      MPI_SUCCESS)
    return false;
  return Wait(&request);
}

// One collective, as it runs on the stream.
struct Work {
  Comm* comm;
  int all_gather;  // else all-reduce
  const void* send;
  void* recv;
  size_t count;
  int type;
};

void Run(const void* ctx) {
  const Work& w = *static_cast<const Work*>(ctx);
  Comm* c = w.comm;
  if (c->aborted || c->async_error != kSuccess) return;
  // The ranks must be making the same call.
  struct Shape {
    long long all_gather, type, count;
  } mine{w.all_gather, w.type, (long long)w.count};
  std::vector<Shape> shapes(size_t(c->nranks));
  if (!Gather(c, &mine, shapes.data(), sizeof mine)) {
    Fail(kRemoteError, "rank %d: a peer did not join a collective within %g s", c->rank, Timeout());
    c->async_error = kRemoteError;
    return;
  }
  for (int r = 0; r < c->nranks; ++r)
    if (std::memcmp(&shapes[size_t(r)], &mine, sizeof mine) != 0) {
      Fail(kInvalidUsage,
           "rank %d runs %s of %lld %s while rank %d runs %s of %lld %s: the ranks' collectives "
           "do not match",
           c->rank, w.all_gather ? "all_gather" : "all_reduce", mine.count, TypeName(w.type), r,
           shapes[size_t(r)].all_gather ? "all_gather" : "all_reduce", shapes[size_t(r)].count,
           TypeName(int(shapes[size_t(r)].type)) ? TypeName(int(shapes[size_t(r)].type)) : "?");
      c->async_error = kInvalidUsage;
      return;
    }
  const size_t bytes = w.count * TypeBytes(w.type);
  std::vector<char> all(bytes * size_t(c->nranks));
  if (!Gather(c, w.send, all.data(), bytes)) {
    Fail(kRemoteError, "rank %d: a peer did not join a collective within %g s", c->rank, Timeout());
    c->async_error = kRemoteError;
    return;
  }
  if (w.all_gather) {
    std::memcpy(w.recv, all.data(), all.size());
  } else {
    for (size_t i = 0; i < w.count; ++i) {
      float sum = 0;
      for (int r = 0; r < c->nranks; ++r) sum += Load(all.data() + size_t(r) * bytes, w.type, i);
      Store(w.recv, w.type, i, sum);
    }
  }
  Log(c, "run %s %s %zu", w.all_gather ? "all_gather" : "all_reduce", TypeName(w.type), w.count);
}

bool IsComm(Comm* c) { return c != nullptr && c->magic == kCommMagic; }

// The checks every collective call makes before it is enqueued.
Result CheckCall(Comm* c, const char* what, const void* send, void* recv, size_t count, int type,
                 size_t recv_count) {
  if (!IsComm(c)) return Fail(kInvalidArgument, "%s: %p is not a communicator", what, (void*)c);
  if (c->aborted) return Fail(kInvalidUsage, "%s on an aborted communicator", what);
  if (!TypeName(type))
    return Fail(kInvalidArgument, "%s: data type %d is not f16 (6), f32 (7) or bf16 (9)", what,
                type);
  if (count == 0) return Fail(kInvalidArgument, "%s of 0 elements", what);
  if (!send || !recv) return Fail(kInvalidArgument, "%s: a null buffer", what);
  static DeviceBytes device_bytes = DriverSymbol<DeviceBytes>("fake_cuda_device_bytes");
  if (device_bytes) {
    const long long need_send = (long long)(count * TypeBytes(type));
    const long long need_recv = (long long)(recv_count * TypeBytes(type));
    const long long have_send = device_bytes((unsigned long long)(uintptr_t)send);
    const long long have_recv = device_bytes((unsigned long long)(uintptr_t)recv);
    if (have_send < need_send)
      return Fail(kInvalidArgument,
                  "%s: the send buffer %p holds %lld bytes of device memory, the call reads %lld",
                  what, send, have_send, need_send);
    if (have_recv < need_recv)
      return Fail(kInvalidArgument,
                  "%s: the receive buffer %p holds %lld bytes of device memory, the call writes "
                  "%lld",
                  what, recv, have_recv, need_recv);
  }
  return kSuccess;
}

// FAKE_NCCL_FAIL for this rank's call number `call`: the mode, or "".
std::string InjectedFailure(const Comm* c, long call) {
  const char* spec = std::getenv("FAKE_NCCL_FAIL");
  if (!spec) return "";
  char mode[16] = {};
  int rank = -1;
  long n = -1;
  if (std::sscanf(spec, "%15[a-z]:%d:%ld", mode, &rank, &n) != 3) {
    std::fprintf(stderr, "fake NCCL: FAKE_NCCL_FAIL=%s is not MODE:RANK:N\n", spec);
    std::abort();
  }
  return rank == c->rank && n == call ? mode : "";
}

Result Submit(Comm* c, const Work& w) {
  const long call = ++c->calls;
  const std::string fail = InjectedFailure(c, call);
  if (fail == "error")
    return Fail(kInternalError, "rank %d: call %ld fails (FAKE_NCCL_FAIL)", c->rank, call);
  if (fail == "async") {
    std::fprintf(stderr, "fake NCCL: rank %d: call %ld fails later (FAKE_NCCL_FAIL)\n", c->rank,
                 call);
    c->async_error = kRemoteError;
    return kSuccess;
  }
  if (fail == "hang") {
    std::fprintf(stderr, "fake NCCL: rank %d: call %ld never completes (FAKE_NCCL_FAIL)\n", c->rank,
                 call);
    static Control control = DriverSymbol<Control>("fake_cuda_control");
    if (control) control("stream_stuck", 1);
    return kSuccess;
  }
  if (!fail.empty()) {
    std::fprintf(stderr, "fake NCCL: FAKE_NCCL_FAIL mode '%s' is not error, async or hang\n",
                 fail.c_str());
    std::abort();
  }
  Log(c, "call %s %s %zu", w.all_gather ? "all_gather" : "all_reduce", TypeName(w.type), w.count);
  static Enqueue enqueue = DriverSymbol<Enqueue>("fake_cuda_enqueue_host");
  if (enqueue)
    enqueue(&Run, &w, sizeof w);
  else
    Run(&w);
  return kSuccess;
}

}  // namespace

#define API extern "C" __attribute__((visibility("default")))

API Result ncclGetVersion(int* version) {
  if (!version) return Fail(kInvalidArgument, "ncclGetVersion: null pointer");
  const char* v = std::getenv("FAKE_NCCL_VERSION");  // a test's older library
  *version = v ? std::atoi(v) : kVersion;
  return kSuccess;
}

API const char* ncclGetErrorString(Result r) {
  switch (r) {
    case 0:
      return "no error";
    case 1:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case 2:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case 3:
      return "internal error - please report this issue to the NCCL developers";
    case 4:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case 5:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case 6:
      return "remote process exited or there was a network error";
    case 7:
      return "NCCL operation in progress";
  }
  return "unknown result code";
}

API const char* ncclGetLastError(Comm*) { return g_last_error.c_str(); }

API Result ncclGetUniqueId(UniqueId* id) {
  if (!id) return Fail(kInvalidArgument, "ncclGetUniqueId: null pointer");
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, &kIdMagic, 8);
  std::random_device rd;
  const uint64_t parts[3] = {uint64_t(getpid()),
                             uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()),
                             (uint64_t(rd()) << 32) | rd()};
  std::memcpy(id->internal + 8, parts, sizeof parts);
  return kSuccess;
}

API Result ncclCommInitRank(Comm** out, int nranks, UniqueId id, int rank) {
  if (!out) return Fail(kInvalidArgument, "ncclCommInitRank: null comm pointer");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    return Fail(kInvalidUsage,
                "ncclCommInitRank: MPI is not initialized (the fake's ranks are mpirun's)");
  int world_size = 0, world_rank = -1;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  if (nranks < 1 || nranks > world_size || rank < 0 || rank >= nranks)
    return Fail(kInvalidArgument,
                "ncclCommInitRank(%d ranks, rank %d) in an MPI world of %d ranks where this is "
                "rank %d",
                nranks, rank, world_size, world_rank);
  uint64_t magic;
  std::memcpy(&magic, id.internal, 8);
  if (magic != kIdMagic)
    return Fail(kInvalidArgument, "ncclCommInitRank: rank %d got no unique id of ncclGetUniqueId",
                rank);
  auto* c = new Comm;
  c->nranks = nranks;
  c->rank = rank;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi) != MPI_SUCCESS) {
    delete c;
    return Fail(kSystemError, "ncclCommInitRank: MPI_Comm_dup failed");
  }
  // Every world rank's id (within the deadline), then the world split by
  // id: the comm is the ranks that got this one, ordered by their `rank`.
  std::vector<UniqueId> ids(static_cast<size_t>(world_size));
  if (!Gather(c, &id, ids.data(), sizeof id)) {
    MPI_Comm_free(&c->mpi);
    delete c;
    return Fail(kRemoteError, "ncclCommInitRank: a peer did not join within %g s", Timeout());
  }
  int color = -1, members = 0;
  for (int r = 0; r < world_size; ++r)
    if (std::memcmp(&ids[size_t(r)], &id, sizeof id) == 0) {
      if (color < 0) color = r;
      ++members;
    }
  MPI_Comm group = MPI_COMM_NULL;
  int group_rank = -1;
  const bool split = MPI_Comm_split(c->mpi, color, rank, &group) == MPI_SUCCESS;
  if (split) MPI_Comm_rank(group, &group_rank);
  MPI_Comm_free(&c->mpi);
  c->mpi = group;
  if (!split || members != nranks || group_rank != rank) {
    if (split) MPI_Comm_free(&c->mpi);
    delete c;
    if (!split) return Fail(kSystemError, "ncclCommInitRank: MPI_Comm_split failed");
    return Fail(kInvalidUsage,
                "ncclCommInitRank(%d ranks, rank %d): %d ranks of the MPI world got its unique id "
                "and it is rank %d among them: the id was not broadcast from one rank to the "
                "comm's ranks, or two ranks claim one place",
                nranks, rank, members, group_rank);
  }
  if (const char* prefix = std::getenv("FAKE_NCCL_LOG")) {
    std::string path = std::string(prefix) + ".rank" + std::to_string(rank);
    c->log = std::fopen(path.c_str(), "a");
    if (!c->log) std::fprintf(stderr, "fake NCCL: cannot open %s\n", path.c_str());
  }
  Log(c, "init %d %d", nranks, rank);
  *out = c;
  return kSuccess;
}

API Result ncclCommDestroy(Comm* c) {
  if (!IsComm(c))
    return Fail(kInvalidArgument, "ncclCommDestroy: %p is not a communicator", (void*)c);
  Log(c, "destroy");
  if (c->log) std::fclose(c->log);
  c->magic = 0;  // a later use is caught (the memory is kept for that)
  return kSuccess;
}

API Result ncclCommAbort(Comm* c) {
  if (!IsComm(c))
    return Fail(kInvalidArgument, "ncclCommAbort: %p is not a communicator", (void*)c);
  Log(c, "abort");
  if (c->log) std::fclose(c->log);
  c->log = nullptr;
  c->aborted = true;
  c->magic = 0;
  return kSuccess;
}

API Result ncclCommGetAsyncError(Comm* c, Result* error) {
  if (!IsComm(c) || !error)
    return Fail(kInvalidArgument, "ncclCommGetAsyncError: %p is not a communicator", (void*)c);
  *error = c->async_error;
  return kSuccess;
}

API Result ncclCommCount(Comm* c, int* count) {
  if (!IsComm(c) || !count)
    return Fail(kInvalidArgument, "ncclCommCount: %p is not a communicator", (void*)c);
  *count = c->nranks;
  return kSuccess;
}

API Result ncclCommUserRank(Comm* c, int* rank) {
  if (!IsComm(c) || !rank)
    return Fail(kInvalidArgument, "ncclCommUserRank: %p is not a communicator", (void*)c);
  *rank = c->rank;
  return kSuccess;
}

API Result ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, Comm* c,
                         void* /*stream*/) {
  if (Result r = CheckCall(c, "ncclAllReduce", send, recv, count, type, count); r != kSuccess)
    return r;
  if (op != kSum) return Fail(kInvalidArgument, "ncclAllReduce: op %d is not ncclSum", op);
  return Submit(c, Work{c, 0, send, recv, count, type});
}

API Result ncclAllGather(const void* send, void* recv, size_t count, int type, Comm* c,
                         void* /*stream*/) {
  if (!IsComm(c))
    return Fail(kInvalidArgument, "ncclAllGather: %p is not a communicator", (void*)c);
  if (Result r = CheckCall(c, "ncclAllGather", send, recv, count, type, count * size_t(c->nranks));
      r != kSuccess)
    return r;
  // In place only at the rank's own slot (nccl.h); llmc gathers out of place.
  const char* s = static_cast<const char*>(send);
  const char* r = static_cast<const char*>(recv);
  const size_t bytes = count * TypeBytes(type);
  if (s < r + bytes * size_t(c->nranks) && r < s + bytes)
    return Fail(kInvalidArgument, "ncclAllGather: the send buffer overlaps the receive buffer");
  return Submit(c, Work{c, 1, send, recv, count, type});
}
