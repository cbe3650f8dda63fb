// A fixed pool of worker threads for the host kernels' parallel_for.
//
// Kernels split their work into ranges; ParallelFor hands the ranges out with
// an atomic counter, the calling thread taking part, and returns when all are
// done. Workers spin briefly before sleeping, because a decode step launches
// hundreds of short kernels back to back and waking a sleeping thread costs
// more than most of them take.
#ifndef LLMC_RUNTIME_HOST_THREAD_POOL_H_
#define LLMC_RUNTIME_HOST_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "llmc/core/artifact/host_abi.h"

namespace llmc {

class ThreadPool {
 public:
  // `threads` counts the caller: ThreadPool(1) runs everything inline.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  void ParallelFor(int64_t n, int64_t grain, llmc_range_fn fn, void* ctx);

  // Adapter with the signature of llmc_parallel_for_fn; `pool` is a ThreadPool*.
  static void ParallelForC(void* pool, int64_t n, int64_t grain, llmc_range_fn fn, void* ctx);

 private:
  // One ParallelFor call. It lives on the caller's stack; workers reach it
  // through `current_` and hold a reference while they run its chunks, so the
  // caller returns only once no worker can still touch it.
  struct Job {
    llmc_range_fn fn = nullptr;
    void* ctx = nullptr;
    int64_t n = 0;
    int64_t chunk = 1;
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::atomic<int> refs{0};
  };
  void WorkerLoop();
  static void RunChunks(Job& job);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;     // guarded by mu_
  Job* current_ = nullptr;  // guarded by mu_
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_HOST_THREAD_POOL_H_
