#include "llmc/runtime/cuda/memory_pool.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace llmc::cuda {
namespace {

size_t RoundUp(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

}  // namespace

DeviceMemoryPool::DeviceMemoryPool(SlabAlloc alloc, SlabFree free, size_t slab_bytes,
                                   size_t alignment)
    : alloc_(std::move(alloc)),
      free_(std::move(free)),
      slab_bytes_(slab_bytes),
      alignment_(alignment && !(alignment & (alignment - 1)) ? alignment : 256) {
  slab_bytes_ = RoundUp(slab_bytes_ ? slab_bytes_ : alignment_, alignment_);
}

DeviceMemoryPool::~DeviceMemoryPool() {
  for (auto& [base, slab] : slabs_) (void)free_(base);
}

absl::StatusOr<CUdeviceptr> DeviceMemoryPool::Allocate(size_t bytes) {
  size_t size = RoundUp(bytes ? bytes : 1, alignment_);
  if (size < bytes)  // wrapped around
    return absl::InvalidArgumentError(absl::StrFormat("device allocation of %d bytes", bytes));
  std::lock_guard<std::mutex> lock(mu_);
  // Best fit over every slab's free list.
  Slab* best_slab = nullptr;
  CUdeviceptr best_slab_base = 0;
  std::map<CUdeviceptr, size_t>::iterator best;
  for (auto& [base, slab] : slabs_) {
    for (auto it = slab.free.begin(); it != slab.free.end(); ++it) {
      if (it->second >= size && (!best_slab || it->second < best->second)) {
        best_slab = &slab;
        best_slab_base = base;
        best = it;
        if (it->second == size) break;
      }
    }
  }
  if (!best_slab) {
    size_t slab_size = std::max(slab_bytes_, size);
    auto got = alloc_(slab_size);
    if (!got.ok() && got.status().code() == absl::StatusCode::kResourceExhausted) {
      (void)TrimLocked();
      got = alloc_(slab_size);
    }
    if (!got.ok())
      return absl::Status(
          got.status().code(),
          absl::StrFormat("device memory pool: a slab of %d bytes for a block of %d: %s (pool: %d "
                          "slabs, %d bytes reserved, %d in use)",
                          slab_size, bytes, got.status().message(), stats_.slabs,
                          stats_.reserved_bytes, stats_.in_use_bytes));
    CUdeviceptr base = *got;
    Slab& slab = slabs_[base];
    slab.size = slab_size;
    best = slab.free.emplace(base, slab_size).first;
    best_slab = &slab;
    best_slab_base = base;
    ++stats_.slabs;
    ++stats_.slab_allocations;
    stats_.reserved_bytes += int64_t(slab_size);
    ++stats_.free_blocks;
  }
  CUdeviceptr ptr = best->first;
  size_t left = best->second - size;
  best_slab->free.erase(best);
  --stats_.free_blocks;
  if (left) {
    best_slab->free.emplace(ptr + size, left);
    ++stats_.free_blocks;
  }
  ++best_slab->live;
  live_[ptr] = Block{size, best_slab_base};
  ++stats_.allocations;
  ++stats_.live_blocks;
  stats_.in_use_bytes += int64_t(size);
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return ptr;
}

absl::Status DeviceMemoryPool::Free(CUdeviceptr ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end())
    return absl::InvalidArgumentError(absl::StrFormat(
        "device memory pool: 0x%x is not a live block of this pool (freed twice?)", ptr));
  Block block = it->second;
  live_.erase(it);
  Slab& slab = slabs_.at(block.slab);
  --slab.live;
  --stats_.live_blocks;
  stats_.in_use_bytes -= int64_t(block.size);
  // Insert and coalesce with the neighbours.
  auto [pos, inserted] = slab.free.emplace(ptr, block.size);
  ++stats_.free_blocks;
  if (pos != slab.free.begin()) {
    auto prev = std::prev(pos);
    if (prev->first + prev->second == pos->first) {
      prev->second += pos->second;
      slab.free.erase(pos);
      pos = prev;
      --stats_.free_blocks;
    }
  }
  auto next = std::next(pos);
  if (next != slab.free.end() && pos->first + pos->second == next->first) {
    pos->second += next->second;
    slab.free.erase(next);
    --stats_.free_blocks;
  }
  return absl::OkStatus();
}

absl::Status DeviceMemoryPool::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  return TrimLocked();
}

absl::Status DeviceMemoryPool::TrimLocked() {
  absl::Status first;
  for (auto it = slabs_.begin(); it != slabs_.end();) {
    if (it->second.live != 0) {
      ++it;
      continue;
    }
    absl::Status st = free_(it->first);
    if (!st.ok()) {
      if (first.ok()) first = st;
      ++it;
      continue;
    }
    --stats_.slabs;
    stats_.reserved_bytes -= int64_t(it->second.size);
    stats_.free_blocks -= int64_t(it->second.free.size());
    it = slabs_.erase(it);
  }
  return first;
}

PoolStats DeviceMemoryPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace llmc::cuda
