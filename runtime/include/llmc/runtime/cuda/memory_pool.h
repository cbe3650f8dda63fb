// A device memory pool: large slabs from the driver (cuMemAlloc), carved into
// aligned blocks by a best-fit free list with coalescing, so that the many
// buffers of a model (activations, KV cache blocks, scratch) cost few driver
// allocations and freeing is cheap. Thread-safe.
//
// The slab allocator is a pair of functions, so the bookkeeping is tested
// without a GPU (CudaDevice passes cuMemAlloc/cuMemFree).
#ifndef LLMC_RUNTIME_CUDA_MEMORY_POOL_H_
#define LLMC_RUNTIME_CUDA_MEMORY_POOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llmc/runtime/cuda/driver_api.h"

namespace llmc::cuda {

struct PoolStats {
  int64_t slabs = 0;               // driver allocations held
  int64_t reserved_bytes = 0;      // their total size
  int64_t in_use_bytes = 0;        // of live blocks (rounded up to the alignment)
  int64_t peak_in_use_bytes = 0;
  int64_t live_blocks = 0;
  int64_t free_blocks = 0;         // free-list entries (fragmentation)
  int64_t allocations = 0;         // Allocate calls that succeeded, ever
  int64_t slab_allocations = 0;    // slabs requested from the driver, ever
};

class DeviceMemoryPool {
 public:
  using SlabAlloc = std::function<absl::StatusOr<CUdeviceptr>(size_t bytes)>;
  using SlabFree = std::function<absl::Status(CUdeviceptr)>;

  // Slabs are `slab_bytes` (a larger request gets a slab of its own size);
  // blocks start at multiples of `alignment` (a power of two; cuMemAlloc's
  // own pointers are 256-byte aligned at least).
  DeviceMemoryPool(SlabAlloc alloc, SlabFree free, size_t slab_bytes = size_t(64) << 20,
                   size_t alignment = 256);
  // Returns every slab to the driver (errors ignored: the context may be
  // going away).
  ~DeviceMemoryPool();
  DeviceMemoryPool(const DeviceMemoryPool&) = delete;
  DeviceMemoryPool& operator=(const DeviceMemoryPool&) = delete;

  // A block of at least `bytes` (0 gives a distinct block of `alignment`).
  // When the driver is out of memory, empty slabs are returned and the slab
  // request retried once; then ResourceExhausted, with the pool's stats.
  absl::StatusOr<CUdeviceptr> Allocate(size_t bytes);
  // Frees a block Allocate returned; InvalidArgument for any other pointer
  // (a double free included).
  absl::Status Free(CUdeviceptr ptr);
  // Returns slabs with no live block to the driver.
  absl::Status Trim();

  PoolStats stats() const;
  size_t alignment() const { return alignment_; }

 private:
  struct Slab {
    size_t size = 0;
    int64_t live = 0;
    std::map<CUdeviceptr, size_t> free;  // address -> size, coalesced
  };
  absl::Status TrimLocked();

  SlabAlloc alloc_;
  SlabFree free_;
  size_t slab_bytes_;
  size_t alignment_;
  mutable std::mutex mu_;
  std::map<CUdeviceptr, Slab> slabs_;  // by base address
  struct Block {
    size_t size;
    CUdeviceptr slab;
  };
  std::unordered_map<CUdeviceptr, Block> live_;
  PoolStats stats_;
};

}  // namespace llmc::cuda

#endif  // LLMC_RUNTIME_CUDA_MEMORY_POOL_H_
