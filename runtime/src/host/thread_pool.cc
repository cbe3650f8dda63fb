#include "llmc/runtime/host/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace llmc {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);  // ends any spin at once
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks(Job& job) {
  int64_t total = job.n;
  for (;;) {
    int64_t begin = job.next.fetch_add(job.chunk);
    if (begin >= total) break;
    int64_t end = std::min(total, begin + job.chunk);
    job.fn(job.ctx, begin, end);
    job.done.fetch_add(end - begin);
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly: within a step the next kernel follows within
    // microseconds, and waking a sleeping thread costs more than that. The
    // spin is bounded in time, not in iterations, so an idle pool (between
    // requests, or on a loaded machine) goes to sleep quickly.
    auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (generation_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < spin_until)
      CpuRelax();
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
      if (stop_) return;
      seen = generation_.load();
      job = current_;
      if (job) job->refs.fetch_add(1);
    }
    if (job) {
      RunChunks(*job);
      job->refs.fetch_sub(1, std::memory_order_release);
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, llmc_range_fn fn, void* ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t workers = int64_t(workers_.size()) + 1;
  if (workers == 1 || n <= grain) {
    fn(ctx, 0, n);
    return;
  }
  Job job;
  job.fn = fn;
  job.ctx = ctx;
  job.n = n;
  // About four chunks per thread balances uneven ranges without much overhead.
  job.chunk = std::max(grain, (n + workers * 4 - 1) / (workers * 4));
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = &job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  RunChunks(job);
  while (job.done.load(std::memory_order_acquire) < n) std::this_thread::yield();
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = nullptr;
  }
  while (job.refs.load(std::memory_order_acquire) > 0) std::this_thread::yield();
}

void ThreadPool::ParallelForC(void* pool, int64_t n, int64_t grain, llmc_range_fn fn, void* ctx) {
  static_cast<ThreadPool*>(pool)->ParallelFor(n, grain, fn, ctx);
}

}  // namespace llmc
