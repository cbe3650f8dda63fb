// A fake CUDA driver for the loader's tests on machines without a GPU: it
// exports the functions driver_api.h resolves, with the driver's C ABI, and
// behaves as a small device whose "device memory" is host memory (so copies
// work). fake_cuda_control(key, value) sets its behaviour; tests reach it by
// dlopen'ing the same path (one handle, one state).
//
// Built three times: as is, with FAKE_CUDA_OLD (no cuMemAlloc_v2, as a driver
// too old to use), and with FAKE_CUDA_NO_GRAPHS (no cuGraph* nor stream
// capture nor cuLaunchKernelEx: a usable driver without the optional
// functions).
//
// Functions are named handles (one per name cuModuleGetFunction is asked
// for), and every cuLaunchKernel is recorded with its grid, block and the
// llmc ABI parameters (fake_libcuda.h), so the CUDA runner's launches can be
// checked; "launch_result" makes launches fail.
//
// Graphs: cuStreamBeginCapture starts graph n (numbered from 1 per reset);
// launches until cuStreamEndCapture are recorded as captured into it and
// not run; cuGraphLaunch records a replay of n. Copies, memsets, allocation
// and synchronization during a capture fail with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, as the driver's thread-local mode
// makes them, so a runner that captures them is caught. Live graphs and
// executable graphs are counted ("graphs", "graph_execs").
//
// For the fake NCCL (fake_nccl.cc), which runs collectives as host work on
// this stream: "stream_stuck" makes cuStreamQuery, and events recorded from
// then on, report CUDA_ERROR_NOT_READY forever (a collective whose peer never
// came), and work enqueued from then on never runs; fake_cuda_device_bytes
// says how far an allocation reaches.
// cuMemcpy2DAsync_v2 copies device to device (captured into graphs, as the
// driver allows) and host to device (not during a capture; counted with the
// asynchronous host copies, bytes and page-locking).
// "graph_node_bytes" makes each instantiated graph take that many bytes of
// device memory per captured launch (cuMemGetInfo's free memory drops by
// them while the executable graph lives).
//
// Deferred streams ("defer", or FAKE_CUDA_DEFER=1 in the environment, for
// test/cuda-emu): stream work (launches, graph replays, asynchronous copies
// and memsets, host work) is queued rather than run when enqueued, and runs
// in order at the next synchronization (of the stream, an event, the
// context; a synchronous copy; a free), reading host memory then, as a
// device's copy engine would. Every such point runs the whole queue, work
// enqueued after the event too: a runner that rewrites a page-locked buffer
// an upload has yet to read, or reads one a later step's download lands in,
// computes the wrong tokens.
#include "fake_libcuda.h"

#include <dlfcn.h>

#include "llmc/runtime/cuda/driver_types.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace {
using CUresult = int;
struct State {
  int init_result = 0;        // what cuInit returns
  int device_count = 1;
  int alloc_limit = -1;       // successful cuMemAlloc calls left (-1: no limit)
  int allocs = 0, frees = 0;  // calls so far
  int ctx_retained = 0;
  int streams = 0;
  int modules = 0;
  int launch_result = 0;          // what cuLaunchKernel returns
  int sm_major = 9;               // the device's compute capability, major (minor 0)
  std::vector<FakeCudaLaunch> launches;
  int memsets = 0;
  int capturing = 0;               // the graph being captured; 0: none
  int captures = 0;                // cuStreamBeginCapture calls
  int graphs = 0, graph_execs = 0;  // live
  int capture_violations = 0;      // calls refused during a capture
  std::vector<int> graph_launches;  // the graph each cuGraphLaunch replayed
  // Host work captured into graphs, numbered from 1 (never freed: few).
  std::vector<std::pair<void (*)(const void*), std::vector<char>>> host_work;
  int stream_stuck = 0;  // cuStreamQuery and later events say "not ready" (a hung collective)
  std::map<uintptr_t, size_t> allocations;  // live cuMemAlloc blocks: start -> bytes
  int copies_2d = 0;                        // cuMemcpy2DAsync_v2 calls
  std::map<uintptr_t, size_t> pinned;       // live cuMemAllocHost blocks: start -> bytes
  int pinned_allocs = 0;                    // cuMemAllocHost calls so far
  // Asynchronous host copies (cuMemcpy{HtoD,DtoH}Async) whose host side is
  // not page-locked: a real driver stages them and makes the host wait.
  int pageable_copies = 0;
  long long h2d_bytes = 0, d2h_bytes = 0;   // asynchronous host copies' bytes
  int defer = -1;  // deferred streams (see above); -1: FAKE_CUDA_DEFER decides
  std::deque<std::function<int()>> queued;  // deferred stream work, in order
  int sticky = 0;  // the first error of deferred work, reported at synchronization
  int flushes = 0;  // synchronizations that ran queued work
  long graph_node_bytes = 0;      // device memory per captured launch of a live executable graph
  long long graph_exec_bytes = 0;  // of the live executable graphs
  long long h2d_2d_bytes = 0;      // host-to-device bytes of cuMemcpy2DAsync_v2
} g;
// An event: whether the stream was stuck when it was recorded.
struct FakeEvent {
  int stuck = 0;
};
struct FakeGraph {
  int id;
  std::vector<FakeCudaLaunch> launches;  // captured
  long long bytes = 0;                   // an executable graph's device memory
};
constexpr int kCaptureUnsupported = 900;  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
// Function handles: stable addresses of their names (never freed; a test
// process asks for few).
std::deque<std::string> functions;
}  // namespace

#define API extern "C" __attribute__((visibility("default")))

API void fake_cuda_control(const char* key, long value) {
  std::string k = key;
  if (k == "reset") g = State{};
  else if (k == "init_result") g.init_result = int(value);
  else if (k == "device_count") g.device_count = int(value);
  else if (k == "alloc_limit") g.alloc_limit = int(value);
  else if (k == "launch_result") g.launch_result = int(value);
  else if (k == "sm_major") g.sm_major = int(value);
  else if (k == "defer") g.defer = int(value);
  else if (k == "graph_node_bytes") g.graph_node_bytes = value;
  else if (k == "stream_stuck")
    g.stream_stuck = int(value);
}
API long fake_cuda_query(const char* key) {
  std::string k = key;
  if (k == "allocs") return g.allocs;
  if (k == "frees") return g.frees;
  if (k == "ctx_retained") return g.ctx_retained;
  if (k == "streams") return g.streams;
  if (k == "modules") return g.modules;
  if (k == "memsets") return g.memsets;
  if (k == "captures") return g.captures;
  if (k == "capturing") return g.capturing;
  if (k == "graphs") return g.graphs;
  if (k == "graph_execs") return g.graph_execs;
  if (k == "capture_violations") return g.capture_violations;
  if (k == "stream_stuck") return g.stream_stuck;
  if (k == "copies_2d") return g.copies_2d;
  if (k == "pinned_allocs") return g.pinned_allocs;
  if (k == "flushes") return g.flushes;
  if (k == "pinned_live") return long(g.pinned.size());
  if (k == "pageable_copies") return g.pageable_copies;
  if (k == "h2d_bytes") return long(g.h2d_bytes);
  if (k == "d2h_bytes") return long(g.d2h_bytes);
  if (k == "h2d_2d_bytes") return long(g.h2d_2d_bytes);
  if (k == "graph_exec_bytes") return long(g.graph_exec_bytes);
  return -1;
}
// Bytes of device memory from `p` to the end of the allocation holding it;
// -1 when `p` is in none (another fake library checks its pointers so).
API long long fake_cuda_device_bytes(unsigned long long p) {
  auto it = g.allocations.upper_bound(uintptr_t(p));
  if (it == g.allocations.begin()) return -1;
  --it;
  if (uintptr_t(p) >= it->first + it->second) return -1;
  return (long long)(it->first + it->second - uintptr_t(p));
}
API long fake_cuda_launch_count() { return long(g.launches.size()); }
API int fake_cuda_launch(long i, FakeCudaLaunch* out) {
  if (i < 0 || i >= long(g.launches.size())) return 0;
  *out = g.launches[size_t(i)];
  return 1;
}

API long fake_cuda_graph_launch_count() { return long(g.graph_launches.size()); }
API int fake_cuda_graph_launch(long i) {
  if (i < 0 || i >= long(g.graph_launches.size())) return 0;
  return g.graph_launches[size_t(i)];
}
// During a capture: the error a call that cannot be captured gets.
#define REFUSE_DURING_CAPTURE()  \
  if (g.capturing) {             \
    ++g.capture_violations;      \
    return kCaptureUnsupported;  \
  }

namespace {
bool Deferring() {
  if (g.defer < 0) {
    const char* env = std::getenv("FAKE_CUDA_DEFER");
    g.defer = env != nullptr && std::strcmp(env, "1") == 0;
  }
  return g.defer == 1;
}
// Runs `work` now, or queues it while deferring.
int OnStream(std::function<int()> work) {
  if (!Deferring()) return work();
  g.queued.push_back(std::move(work));
  return 0;
}
// Runs the queued work in order; the first error stays (a sticky error).
int Flush() {
  if (!g.queued.empty()) ++g.flushes;
  while (!g.queued.empty()) {
    std::function<int()> work = std::move(g.queued.front());
    g.queued.pop_front();
    if (int r = work(); r != 0 && g.sticky == 0) g.sticky = r;
  }
  return g.sticky;
}
}  // namespace
#define FLUSH_OR_RETURN()            \
  if (int flushed = Flush(); flushed) \
    return flushed

API CUresult cuGetErrorName(CUresult r, const char** s) {
  switch (r) {
    case 0: *s = "CUDA_SUCCESS"; return 0;
    case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 218: *s = "CUDA_ERROR_INVALID_PTX"; return 0;
    case 500: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
    case 600:
      *s = "CUDA_ERROR_NOT_READY";
      return 0;
    case 900: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return 0;
  }
  *s = nullptr;
  return 1;
}
API CUresult cuGetErrorString(CUresult r, const char** s) {
  switch (r) {
    case 0: *s = "no error"; return 0;
    case 1: *s = "invalid argument"; return 0;
    case 2: *s = "out of memory"; return 0;
    case 100: *s = "no CUDA-capable device is detected"; return 0;
    case 218: *s = "a PTX JIT compilation failed"; return 0;
    case 500: *s = "named symbol not found"; return 0;
    case 600:
      *s = "device not ready";
      return 0;
    case 900: *s = "operation not permitted when stream is capturing"; return 0;
  }
  *s = nullptr;
  return 1;
}
API CUresult cuInit(unsigned) { return g.init_result; }
API CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
API CUresult cuDeviceGetCount(int* n) { *n = g.device_count; return 0; }
API CUresult cuDeviceGet(int* d, int i) {
  if (i < 0 || i >= g.device_count) return 101;
  *d = i;
  return 0;
}
API CUresult cuDeviceGetName(char* name, int len, int) {
  std::strncpy(name, "Fake GPU", size_t(len));
  return 0;
}
API CUresult cuDeviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 75: *v = g.sm_major; return 0;  // compute capability (9.0 unless "sm_major")
    case 76: *v = 0; return 0;
    case 16: *v = 132; return 0;   // SMs
    case 38: *v = 50 << 20; return 0;
    case 97: *v = 227 << 10; return 0;
  }
  *v = 0;
  return 1;
}
API CUresult cuDeviceTotalMem_v2(size_t* b, int) { *b = size_t(80) << 30; return 0; }
API CUresult cuDevicePrimaryCtxRetain(void** c, int) { ++g.ctx_retained; *c = &g; return 0; }
API CUresult cuDevicePrimaryCtxRelease_v2(int) { --g.ctx_retained; return 0; }
API CUresult cuCtxSetCurrent(void*) { return 0; }
API CUresult cuCtxSynchronize() {
  FLUSH_OR_RETURN();
  REFUSE_DURING_CAPTURE();
  return 0;
}
// Free memory: 1 GiB of the 80 unless $FAKE_CUDA_FREE_BYTES says otherwise.
// The fake's device memory is host memory that the runtime zeroes, so a KV
// cache sized by default (a fraction of what is free) must stay small: at 80
// GiB free a tiny model's capped cache took 16 GiB and the kernel's OOM
// killer ended a test running beside others.
API CUresult cuMemGetInfo_v2(size_t* f, size_t* t) {
  *t = size_t(80) << 30;
  *f = size_t(1) << 30;
  if (const char* text = std::getenv("FAKE_CUDA_FREE_BYTES")) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(text, &end, 10);
    if (end != text && *end == '\0' && v <= *t) *f = size_t(v);
  }
  *f -= std::min(*f, size_t(g.graph_exec_bytes));
  return 0;
}

// Execution (test/cuda-emu): with FAKE_CUDA_KERNELS naming an artifact's
// kernels built for the CPU (cuda_emu.h), modules stand for that object and
// cuLaunchKernel runs the named entry over its grid (llmc_emu_run), so the
// runtime's CUDA backend computes real logits on this fake device.
namespace {
void* g_emu = nullptr;
int (*g_emu_run)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                 void**) = nullptr;
bool LoadEmulatedKernels() {
  const char* path = std::getenv("FAKE_CUDA_KERNELS");
  if (path == nullptr || g_emu != nullptr) return true;
  g_emu = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (g_emu != nullptr)
    g_emu_run = reinterpret_cast<decltype(g_emu_run)>(dlsym(g_emu, "llmc_emu_run"));
  if (g_emu == nullptr || g_emu_run == nullptr) {
    std::fprintf(stderr, "fake libcuda: FAKE_CUDA_KERNELS=%s: %s\n", path,
                 g_emu == nullptr ? dlerror() : "no llmc_emu_run");
    return false;
  }
  return true;
}
// Runs the launch when emulating; 0 otherwise or on success.
int RunEmulated(const char* symbol, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                unsigned by, unsigned bz, void** params) {
  if (g_emu_run == nullptr) return 0;
  void* fn = dlsym(g_emu, symbol);
  if (fn == nullptr) return 500;  // CUDA_ERROR_NOT_FOUND
  return g_emu_run(fn, gx, gy, gz, bx, by, bz, params) == 0 ? 0 : 719;  // LAUNCH_FAILED
}
}  // namespace

// PTX "modules": text containing "error" fails with a log; otherwise a module
// whose functions are any name but "missing".
API CUresult cuModuleLoadDataEx(void** m, const void* image, unsigned n, int* opts, void** vals) {
  const char* ptx = static_cast<const char*>(image);
  bool bad = std::strstr(ptx, "error") != nullptr;
  for (unsigned i = 0; i < n; ++i) {
    if (opts[i] == 5 && bad) {  // CU_JIT_ERROR_LOG_BUFFER
      const char* log = "ptxas application ptx input, line 3; error   : Unknown symbol 'oops'";
      size_t cap = 0;
      for (unsigned j = 0; j < n; ++j)
        if (opts[j] == 6) cap = uintptr_t(vals[j]);
      std::strncpy(static_cast<char*>(vals[i]), log, cap);
      for (unsigned j = 0; j < n; ++j)
        if (opts[j] == 6) vals[j] = reinterpret_cast<void*>(uintptr_t(std::strlen(log) + 1));
    }
    if (opts[i] == 3 && !bad) {  // CU_JIT_INFO_LOG_BUFFER
      const char* log = "ptxas info    : Used 32 registers";
      std::strcpy(static_cast<char*>(vals[i]), log);
      for (unsigned j = 0; j < n; ++j)
        if (opts[j] == 4) vals[j] = reinterpret_cast<void*>(uintptr_t(std::strlen(log) + 1));
    }
    if (opts[i] == 2) {  // CU_JIT_WALL_TIME: a float in the slot
      float ms = 1.5f;
      uint32_t bits;
      std::memcpy(&bits, &ms, 4);
      vals[i] = reinterpret_cast<void*>(uintptr_t(bits));
    }
  }
  if (bad) return 218;
  if (!LoadEmulatedKernels()) return 218;
  ++g.modules;
  *m = &g;
  return 0;
}
API CUresult cuModuleUnload(void*) { --g.modules; return 0; }
API CUresult cuModuleGetFunction(void** f, void*, const char* name) {
  if (std::strcmp(name, "missing") == 0) return 500;
  for (std::string& fn : functions)
    if (fn == name) {
      *f = &fn;
      return 0;
    }
  functions.emplace_back(name);
  *f = &functions.back();
  return 0;
}
API CUresult cuFuncSetAttribute(void*, int, int) { return 0; }
namespace {
CUresult Launch(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, unsigned shared, void** params, int programmatic) {
  if (g.launch_result != 0) return g.launch_result;
  FakeCudaLaunch l{};
  l.programmatic = programmatic;
  std::strncpy(l.symbol, static_cast<const std::string*>(f)->c_str(), sizeof l.symbol - 1);
  l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
  l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
  l.shared_bytes = shared;
  if (params) {
    l.has_params = 1;
    std::memcpy(&l.info, params[0], sizeof l.info);
    std::memcpy(&l.args, params[1], sizeof l.args);
  }
  l.graph = g.capturing;
  g.launches.push_back(l);
  if (g.capturing) return 0;  // captured: it runs when the graph is launched
  if (g.stream_stuck) return 0;  // queued behind work that never ends
  if (!Deferring()) return RunEmulated(l.symbol, gx, gy, gz, bx, by, bz, params);
  // The parameters as they are now (the driver copies them at the launch).
  return OnStream([l]() mutable {
    void* copied[] = {&l.info, &l.args};
    return RunEmulated(l.symbol, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                       l.block[2], l.has_params ? copied : nullptr);
  });
}
}  // namespace
API CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, void*, void** params,
                            void**) {
  return Launch(f, gx, gy, gz, bx, by, bz, shared, params, 0);
}
#ifndef FAKE_CUDA_NO_GRAPHS
// The emulation runs grids one after another, so programmatic stream
// serialization changes nothing but the record. Attributes other than it
// (id 6) are refused, as an unknown launch attribute would be.
API CUresult cuLaunchKernelEx(const llmc::cuda::CUlaunchConfig* c, void* f, void** params,
                              void** extra) {
  if (c == nullptr || (c->numAttrs > 0 && c->attrs == nullptr)) return 1;
  int programmatic = 0;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    if (c->attrs[i].id != llmc::cuda::kLaunchAttributeProgrammaticStreamSerialization) return 1;
    programmatic = c->attrs[i].value.programmaticStreamSerializationAllowed != 0;
  }
  (void)extra;
  return Launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                c->sharedMemBytes, params, programmatic);
}
#endif
#ifndef FAKE_CUDA_OLD
API CUresult cuMemAlloc_v2(unsigned long long* p, size_t bytes) {
  REFUSE_DURING_CAPTURE();
  if (g.alloc_limit == 0) return 2;
  if (g.alloc_limit > 0) --g.alloc_limit;
  void* m = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!m) return 2;
  ++g.allocs;
  *p = reinterpret_cast<uintptr_t>(m);
  g.allocations[uintptr_t(m)] = bytes;
  return 0;
}
#endif
API CUresult cuMemFree_v2(unsigned long long p) {
  REFUSE_DURING_CAPTURE();
  FLUSH_OR_RETURN();
  ++g.frees;
  g.allocations.erase(uintptr_t(p));
  std::free(reinterpret_cast<void*>(uintptr_t(p)));
  return 0;
}
API CUresult cuMemcpyHtoD_v2(unsigned long long d, const void* s, size_t n) {
  REFUSE_DURING_CAPTURE();
  FLUSH_OR_RETURN();
  std::memcpy(reinterpret_cast<void*>(uintptr_t(d)), s, n);
  return 0;
}
API CUresult cuMemcpyDtoH_v2(void* d, unsigned long long s, size_t n) {
  REFUSE_DURING_CAPTURE();
  FLUSH_OR_RETURN();
  std::memcpy(d, reinterpret_cast<void*>(uintptr_t(s)), n);
  return 0;
}
API CUresult cuMemcpyDtoD_v2(unsigned long long d, unsigned long long s, size_t n) {
  REFUSE_DURING_CAPTURE();
  FLUSH_OR_RETURN();
  std::memcpy(reinterpret_cast<void*>(uintptr_t(d)), reinterpret_cast<void*>(uintptr_t(s)), n);
  return 0;
}
API CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  REFUSE_DURING_CAPTURE();
  void* m = std::malloc(bytes > 0 ? bytes : 1);
  if (!m) return 2;
  ++g.pinned_allocs;
  g.pinned[uintptr_t(m)] = bytes;
  *p = m;
  return 0;
}
API CUresult cuMemFreeHost(void* p) {
  REFUSE_DURING_CAPTURE();
  FLUSH_OR_RETURN();
  // Freed whether or not a "reset" forgot it since, as cuMemFree_v2 does.
  g.pinned.erase(uintptr_t(p));
  std::free(p);
  return 0;
}
namespace {
// Whether [p, p + n) lies in one page-locked block.
bool Pinned(const void* p, size_t n) {
  auto it = g.pinned.upper_bound(uintptr_t(p));
  if (it == g.pinned.begin()) return false;
  --it;
  return uintptr_t(p) + n <= it->first + it->second;
}
}  // namespace
namespace {
// A stream-ordered memcpy between addresses, both host memory here.
int CopyOnStream(void* d, const void* s, size_t n) {
  return OnStream([d, s, n] {
    std::memcpy(d, s, n);
    return 0;
  });
}
}  // namespace
API CUresult cuMemcpyHtoDAsync_v2(unsigned long long d, const void* s, size_t n, void*) {
  REFUSE_DURING_CAPTURE();
  if (!Pinned(s, n)) ++g.pageable_copies;
  g.h2d_bytes += (long long)n;
  return CopyOnStream(reinterpret_cast<void*>(uintptr_t(d)), s, n);
}
API CUresult cuMemcpyDtoHAsync_v2(void* d, unsigned long long s, size_t n, void*) {
  REFUSE_DURING_CAPTURE();
  if (!Pinned(d, n)) ++g.pageable_copies;
  g.d2h_bytes += (long long)n;
  return CopyOnStream(d, reinterpret_cast<const void*>(uintptr_t(s)), n);
}
API CUresult cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void*) {
  REFUSE_DURING_CAPTURE();
  return CopyOnStream(reinterpret_cast<void*>(uintptr_t(d)),
                      reinterpret_cast<const void*>(uintptr_t(s)), n);
}
API CUresult cuMemsetD8Async(unsigned long long d, unsigned char v, size_t n, void*) {
  REFUSE_DURING_CAPTURE();
  ++g.memsets;
  return OnStream([d, v, n] {
    std::memset(reinterpret_cast<void*>(uintptr_t(d)), v, n);
    return 0;
  });
}
API CUresult cuStreamCreate(void** s, unsigned) { ++g.streams; *s = &g; return 0; }
API CUresult cuStreamSynchronize(void*) {
  REFUSE_DURING_CAPTURE();
  return Flush();
}
API CUresult cuStreamDestroy_v2(void*) { --g.streams; return 0; }
// Work runs when it is enqueued, so the stream is always done, unless
// "stream_stuck" (a fake NCCL's hung collective) says it never will be.
API CUresult cuStreamQuery(void*) {
  REFUSE_DURING_CAPTURE();
  FLUSH_OR_RETURN();
  return g.stream_stuck ? 600 : 0;  // CUDA_ERROR_NOT_READY
}
API CUresult cuEventCreate(void** e, unsigned) {
  *e = new FakeEvent;
  return 0;
}
API CUresult cuEventRecord(void* e, void*) {
  if (!e) return 1;
  static_cast<FakeEvent*>(e)->stuck = g.stream_stuck;
  return 0;
}
API CUresult cuEventQuery(void* e) {
  if (!e) return 1;
  FLUSH_OR_RETURN();
  return static_cast<FakeEvent*>(e)->stuck ? 600 : 0;
}
API CUresult cuEventSynchronize(void*) { return Flush(); }
// Only the unversioned name, as drivers before CUDA 12.8 export it.
API CUresult cuEventElapsedTime(float* ms, void*, void*) { *ms = 0.25f; return 0; }
API CUresult cuEventDestroy_v2(void* e) {
  delete static_cast<FakeEvent*>(e);
  return 0;
}
API int fake_cuda_enqueue_host(void (*run)(const void*), const void* ctx, unsigned long bytes) {
  if (!g.capturing) {
    if (g.stream_stuck) return 0;  // queued behind work that never ends
    const char* c = static_cast<const char*>(ctx);
    return OnStream([run, copy = std::vector<char>(c, c + bytes)] {
      run(copy.data());
      return 0;
    });
  }
  const char* c = static_cast<const char*>(ctx);
  g.host_work.push_back({run, std::vector<char>(c, c + bytes)});
  FakeCudaLaunch l{};
  std::strncpy(l.symbol, "<host work>", sizeof l.symbol - 1);
  l.graph = g.capturing;
  l.host_work = int(g.host_work.size());
  g.launches.push_back(l);
  return 0;
}
// cuMemcpy2DAsync_v2, device to device or host to device (what the runtime
// uses; other memory types fail with CUDA_ERROR_INVALID_VALUE). The struct
// is CUDA_MEMCPY2D_v2's layout. A device-to-device copy may be captured into
// a graph, as the driver allows: captured, it runs when the graph does.
namespace {
struct Copy2D {
  size_t src_x, src_y;
  int src_type;
  const void* src_host;
  unsigned long long src_device;
  void* src_array;
  size_t src_pitch;
  size_t dst_x, dst_y;
  int dst_type;
  void* dst_host;
  unsigned long long dst_device;
  void* dst_array;
  size_t dst_pitch;
  size_t width, height;
};
void RunCopy2D(const void* ctx) {
  const Copy2D& c = *static_cast<const Copy2D*>(ctx);
  const char* src = c.src_type == 1 ? static_cast<const char*>(c.src_host)
                                    : reinterpret_cast<const char*>(uintptr_t(c.src_device));
  for (size_t r = 0; r < c.height; ++r)
    std::memcpy(
        reinterpret_cast<char*>(uintptr_t(c.dst_device)) + (c.dst_y + r) * c.dst_pitch + c.dst_x,
        src + (c.src_y + r) * c.src_pitch + c.src_x, c.width);
}
}  // namespace
API CUresult cuMemcpy2DAsync_v2(const Copy2D* c, void*) {
  if (!c || c->dst_type != 2 || !c->dst_device) return 1;
  const bool from_host = c->src_type == 1;
  if (from_host ? !c->src_host : (c->src_type != 2 || !c->src_device)) return 1;
  if (c->width > c->src_pitch || c->width > c->dst_pitch) return 1;  // rows would overlap
  if (from_host) {
    REFUSE_DURING_CAPTURE();
    const size_t span = c->height ? (c->src_y + c->height - 1) * c->src_pitch + c->src_x + c->width : 0;
    if (span && !Pinned(c->src_host, span)) ++g.pageable_copies;
    g.h2d_bytes += (long long)(c->width * c->height);
    g.h2d_2d_bytes += (long long)(c->width * c->height);
  }
  ++g.copies_2d;
  return fake_cuda_enqueue_host(&RunCopy2D, c, sizeof *c);
}
#ifndef FAKE_CUDA_NO_GRAPHS
API CUresult cuStreamBeginCapture_v2(void*, int) {
  if (g.capturing) return kCaptureUnsupported;
  g.capturing = ++g.captures;
  return 0;
}
API CUresult cuStreamEndCapture(void*, void** graph) {
  if (!g.capturing) return 1;
  auto* captured = new FakeGraph{g.capturing, {}};
  for (const FakeCudaLaunch& l : g.launches)
    if (l.graph == g.capturing) captured->launches.push_back(l);
  *graph = captured;
  ++g.graphs;
  g.capturing = 0;
  return 0;
}
API CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  if (!graph) return 1;
  auto* made = new FakeGraph(*static_cast<FakeGraph*>(graph));
  made->bytes = (long long)made->launches.size() * g.graph_node_bytes;
  g.graph_exec_bytes += made->bytes;
  *exec = made;
  ++g.graph_execs;
  return 0;
}
API CUresult cuGraphLaunch(void* exec, void*) {
  REFUSE_DURING_CAPTURE();
  if (!exec) return 1;
  const FakeGraph& graph = *static_cast<FakeGraph*>(exec);
  g.graph_launches.push_back(graph.id);
  if (g.stream_stuck) return 0;  // queued behind work that never ends
  // Emulating: the captured launches run, with their parameters as captured.
  return OnStream([launches = graph.launches] {
    for (const FakeCudaLaunch& l : launches) {
      if (l.host_work > 0) {
        const auto& [run, ctx] = g.host_work[size_t(l.host_work - 1)];
        run(ctx.data());
        continue;
      }
      FakeCudaLaunch copy = l;
      void* params[] = {&copy.info, &copy.args};
      if (int r = RunEmulated(copy.symbol, l.grid[0], l.grid[1], l.grid[2], l.block[0],
                              l.block[1], l.block[2], l.has_params ? params : nullptr))
        return r;
    }
    return 0;
  });
}
API CUresult cuGraphExecDestroy(void* exec) {
  if (exec) g.graph_exec_bytes -= static_cast<FakeGraph*>(exec)->bytes;
  delete static_cast<FakeGraph*>(exec);
  --g.graph_execs;
  return 0;
}
API CUresult cuGraphDestroy(void* graph) {
  delete static_cast<FakeGraph*>(graph);
  --g.graphs;
  return 0;
}
#endif
