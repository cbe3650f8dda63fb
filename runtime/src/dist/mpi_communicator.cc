// MpiWorld(): the ranks of MPI_COMM_WORLD. Every collective is a
// non-blocking MPI call polled against a deadline, because a blocking one
// waits forever for a rank that died or hangs; past the deadline the rank
// says which collective stalled and MPI_Abort ends the whole world.
//
// Compiled in every build; without MPI (LLMC_HAVE_MPI unset) MpiWorld()
// says how to get it, so that single-rank use needs no MPI installed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "llmc/runtime/dist/communicator.h"
#include "validate.h"

#if LLMC_HAVE_MPI
#include <mpi.h>
#endif

namespace llmc {

#if LLMC_HAVE_MPI
namespace {

using dist_internal::CheckBuffer;
using dist_internal::CheckRoot;

// MPI counts are ints: longer buffers go in pieces of this many elements.
constexpr int64_t kMaxChunk = int64_t{1} << 30;

absl::Status MpiError(int code, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return absl::InternalError(
      absl::StrFormat("%s failed: MPI error %d: %s", what, code, std::string(text, length)));
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size, double timeout_seconds)
      : comm_(comm), rank_(rank), size_(size), timeout_seconds_(timeout_seconds) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void set_timeout(double seconds) { timeout_seconds_.store(seconds); }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    if (absl::Status s = CheckBuffer("AllReduceSum", data, count); !s.ok()) return s;
    for (int64_t begin = 0; begin < count; begin += kMaxChunk) {
      int n = static_cast<int>(std::min(kMaxChunk, count - begin));
      MPI_Request request;
      int rc = MPI_Iallreduce(MPI_IN_PLACE, data + begin, n, MPI_FLOAT, MPI_SUM, comm_, &request);
      if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Iallreduce");
      if (absl::Status s = Wait(&request, "AllReduceSum", count, "floats"); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status AllGather(const float* in, float* out, int64_t count) override {
    if (absl::Status s = CheckBuffer("AllGather", in, count); !s.ok()) return s;
    if (absl::Status s = CheckBuffer("AllGather", out, count); !s.ok()) return s;
    // The output interleaves the ranks, so it cannot go in simple pieces;
    // 2^31 floats (8 GiB) per rank is far past any activation gathered.
    if (count > INT_MAX)
      return absl::InvalidArgumentError(
          absl::StrFormat("AllGather: %d floats per rank is more than MPI's %d", count, INT_MAX));
    MPI_Request request;
    int n = static_cast<int>(count);
    int rc = MPI_Iallgather(in, n, MPI_FLOAT, out, n, MPI_FLOAT, comm_, &request);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Iallgather");
    return Wait(&request, "AllGather", count, "floats");
  }

  absl::Status Broadcast(void* data, int64_t bytes, int root) override {
    if (absl::Status s = CheckBuffer("Broadcast", data, bytes); !s.ok()) return s;
    if (absl::Status s = CheckRoot(root, size_); !s.ok()) return s;
    char* base = static_cast<char*>(data);
    for (int64_t begin = 0; begin < bytes; begin += kMaxChunk) {
      int n = static_cast<int>(std::min(kMaxChunk, bytes - begin));
      MPI_Request request;
      int rc = MPI_Ibcast(base + begin, n, MPI_BYTE, root, comm_, &request);
      if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Ibcast");
      if (absl::Status s = Wait(&request, "Broadcast", bytes, "bytes"); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // The world lives until exit; a split group (a stage's TP ranks) is
  // freed with its owner, its last sends delivered first.
  ~MpiCommunicator() override {
    (void)Flush();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  absl::Status Send(const void* data, int64_t bytes, int peer, Channel channel) override {
    if (absl::Status s = CheckBuffer("Send", data, bytes); !s.ok()) return s;
    if (absl::Status s = CheckRoot(peer, size_); !s.ok()) return s;
    if (bytes > INT_MAX)
      return absl::InvalidArgumentError(
          absl::StrFormat("Send: %d bytes is more than MPI's %d per message", bytes, INT_MAX));
    // Bounded: sends that arrived are let go; past many in flight, the
    // oldest must arrive first.
    if (absl::Status s = ReapArrivedSends(); !s.ok()) return s;
    while (sends_.size() >= kMaxSendsInFlight)
      if (absl::Status s = CompleteOldestSend(); !s.ok()) return s;
    PendingSend& send = sends_.emplace_back();
    const char* p = static_cast<const char*>(data);
    send.bytes.assign(p, p + bytes);
    send.peer = peer;
    int rc = MPI_Isend(send.bytes.data(), int(bytes), MPI_BYTE, peer, int(channel), comm_,
                       &send.request);
    if (rc != MPI_SUCCESS) {
      sends_.pop_back();
      return MpiError(rc, "MPI_Isend");
    }
    return absl::OkStatus();
  }

  absl::Status Recv(void* data, int64_t bytes, int peer, Channel channel) override {
    return RecvWithin(data, bytes, peer, channel, timeout_seconds_.load());
  }

  absl::Status WaitForRecv(void* data, int64_t bytes, int peer, Channel channel) override {
    return RecvWithin(data, bytes, peer, channel, std::numeric_limits<double>::infinity());
  }

  absl::Status RecvWithin(void* data, int64_t bytes, int peer, Channel channel, double timeout) {
    if (absl::Status s = CheckBuffer("Recv", data, bytes); !s.ok()) return s;
    if (absl::Status s = CheckRoot(peer, size_); !s.ok()) return s;
    if (bytes > INT_MAX)
      return absl::InvalidArgumentError(
          absl::StrFormat("Recv: %d bytes is more than MPI's %d per message", bytes, INT_MAX));
    // One byte more than expected, so that a longer message shows as one
    // (MPI would call it truncation, an error without the sizes).
    recv_scratch_.resize(size_t(bytes) + 1);
    MPI_Request request;
    int rc = MPI_Irecv(recv_scratch_.data(), int(bytes) + 1, MPI_BYTE, peer, int(channel), comm_,
                       &request);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Irecv");
    MPI_Status status;
    if (absl::Status s = Wait(&request, "Recv", bytes, "bytes", timeout, &status); !s.ok())
      return s;
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (got != bytes)
      return absl::DataLossError(absl::StrFormat(
          "Recv: rank %d sent %d bytes, rank %d expected %d (do the stages' plans agree?)", peer,
          got, rank_, bytes));
    std::memcpy(data, recv_scratch_.data(), size_t(bytes));
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    while (!sends_.empty())
      if (absl::Status s = CompleteOldestSend(); !s.ok()) return s;
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
    if (color < 0)
      return absl::InvalidArgumentError(absl::StrFormat("Split: color %d is negative", color));
    MPI_Comm sub;
    // MPI_Comm_split blocks; every rank calls it right after joining the
    // world, before any rank can have died mid-step.
    int rc = MPI_Comm_split(comm_, color, key, &sub);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_split");
    rc = MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_set_errhandler");
    int rank = 0, size = 0;
    MPI_Comm_rank(sub, &rank);
    MPI_Comm_size(sub, &size);
    return std::unique_ptr<Communicator>(
        new MpiCommunicator(sub, rank, size, timeout_seconds_.load()));
  }

 private:
  // Messages are tagged by channel; collectives never match them.
  static constexpr size_t kMaxSendsInFlight = 256;

  struct PendingSend {
    std::vector<char> bytes;  // the copy MPI_Isend reads from until done
    int peer = 0;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  // Lets go of the sends that have arrived (tested, not waited for).
  absl::Status ReapArrivedSends() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      int done = 0;
      int rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return MpiError(rc, "Send");
      it = done ? sends_.erase(it) : it + 1;
    }
    return absl::OkStatus();
  }

  absl::Status CompleteOldestSend() {
    PendingSend& send = sends_.front();
    absl::Status s =
        Wait(&send.request, "Send", int64_t(send.bytes.size()), "bytes", timeout_seconds_.load());
    sends_.pop_front();
    return s;
  }

  // Polls `request` until it completes or the timeout passes. The first
  // polls spin (a step's collectives usually complete within microseconds);
  // after them each poll sleeps a little, so a long wait leaves the core to
  // the other ranks (oversubscribed worlds) and other threads.
  absl::Status Wait(MPI_Request* request, const char* collective, int64_t count, const char* unit) {
    return Wait(request, collective, count, unit, timeout_seconds_.load());
  }
  absl::Status Wait(MPI_Request* request, const char* collective, int64_t count, const char* unit,
                    double timeout, MPI_Status* status = MPI_STATUS_IGNORE) {
    constexpr int kSpins = 100;
    const auto start = std::chrono::steady_clock::now();
    for (int polls = 0;; ++polls) {
      int done = 0;
      int rc = MPI_Test(request, &done, status);
      if (rc != MPI_SUCCESS) return MpiError(rc, collective);
      if (done) return absl::OkStatus();
      if (polls < kSpins) continue;
      std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
      if (waited.count() > timeout) Abort(collective, count, unit, timeout);
      // Past 10 ms this is an idle wait (a follower between a server's
      // requests): poll every millisecond rather than 20,000 times a second.
      std::this_thread::sleep_for(std::chrono::microseconds(waited.count() > 0.01 ? 1000 : 50));
    }
  }

  // A rank that never joins leaves the others' requests pending forever, and
  // a world with a missing rank cannot continue: end every rank, loudly.
  [[noreturn]] void Abort(const char* collective, int64_t count, const char* unit, double timeout) {
    std::fprintf(stderr,
                 "llmc: rank %d of %d: %s of %lld %s did not complete within %g s: another rank "
                 "died or hangs; ending all ranks\n",
                 rank_, size_, collective, static_cast<long long>(count), unit, timeout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    std::_Exit(3);  // MPI_Abort does not return; should it, still end here
  }

  MPI_Comm comm_;
  int rank_;
  int size_;
  std::atomic<double> timeout_seconds_;
  std::deque<PendingSend> sends_;  // oldest first
  std::vector<char> recv_scratch_;
};

void FinalizeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Starts MPI (unless the program already did) and duplicates
// MPI_COMM_WORLD, so that llmc's collectives never match messages of the
// program's own. Runs once; the communicator lives until exit.
absl::StatusOr<MpiCommunicator*> StartWorld(double timeout_seconds) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // SERIALIZED, not FUNNELED: the collectives may come from the engine's
    // thread rather than main(), one call at a time.
    int provided = MPI_THREAD_SINGLE;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init_thread");
    std::atexit(FinalizeMpi);
    if (provided < MPI_THREAD_SERIALIZED)
      return absl::FailedPreconditionError(absl::StrFormat(
          "this MPI provides thread level %d, below MPI_THREAD_SERIALIZED (%d) that llmc needs",
          provided, MPI_THREAD_SERIALIZED));
  }
  MPI_Comm comm;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_dup");
  // Errors as return codes (turned into absl::Status), not MPI's default of
  // aborting every rank without saying which call failed.
  rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_set_errhandler");
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  return new MpiCommunicator(comm, rank, size, timeout_seconds);
}

}  // namespace
#endif  // LLMC_HAVE_MPI

absl::StatusOr<Communicator*> MpiWorld(double timeout_seconds) {
  if (!(timeout_seconds > 0))  // also NaN
    return absl::InvalidArgumentError(
        absl::StrFormat("MpiWorld: the timeout must be positive, got %g s", timeout_seconds));
#if LLMC_HAVE_MPI
  // A function-local static: MPI_Init_thread may run once per process (a
  // failed start is not retried). Never destroyed: MPI outlives it.
  static const auto* world = new absl::StatusOr<MpiCommunicator*>(StartWorld(timeout_seconds));
  if (!world->ok()) return world->status();
  // The latest caller's timeout bounds the collectives from now on.
  (**world)->set_timeout(timeout_seconds);
  return **world;
#else
  return absl::FailedPreconditionError(
      "this llmc was built without MPI: install libopenmpi-dev and rebuild to run partitioned "
      "artifacts");
#endif
}

}  // namespace llmc

namespace llmc {

void EndWorldOnError(const absl::Status& status) {
#if LLMC_HAVE_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (status.ok() || !initialized || finalized) return;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) return;
  std::fprintf(stderr, "llmc: rank %d of %d: %s; ending all ranks\n", rank, size,
               std::string(status.message()).c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
#else
  (void)status;
#endif
}

}  // namespace llmc
