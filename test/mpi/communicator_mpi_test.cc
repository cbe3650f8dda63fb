// The MPI communicator across the ranks of an `mpirun` world (registered in
// CMakeLists.txt with 2 and 3 ranks). Plain main(): every rank runs the
// checks, prints a PASS or FAIL line for each, and exits 0 when all passed.
//
//   --expect-size N   the world must have N ranks
//   --timeout T       MpiWorld()'s collective timeout in seconds (default 30)
//   --kill-rank R     rank R exits (status 9) before the first collective
//   --hang-rank R     rank R sleeps for an hour instead of joining it
// With --kill-rank or --hang-rank the other ranks must not return from the
// collective: failure_test.py checks how the world ends.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "llmc/runtime/dist/communicator.h"

namespace llmc {
namespace {

struct Options {
  int expect_size = 0;
  double timeout = 30;
  int kill_rank = -1;
  int hang_rank = -1;
};

// Floats in [-1, 1) from a seed, built from the generator's bits so that any
// rank can regenerate any other rank's data.
std::vector<float> RandomFloats(uint32_t seed, int64_t n) {
  std::mt19937 gen(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(gen() >> 8) * (2.0f / (1 << 24)) - 1.0f;
  return v;
}

std::vector<unsigned char> RandomBytes(uint32_t seed, int64_t n) {
  std::mt19937 gen(seed);
  std::vector<unsigned char> v(n);
  for (unsigned char& b : v) b = static_cast<unsigned char>(gen() >> 24);
  return v;
}

uint32_t Seed(int rank, int64_t n, uint32_t salt) {
  return static_cast<uint32_t>(rank * 1000003 + n * 31 + salt);
}

class Checker {
 public:
  explicit Checker(int rank) : rank_(rank) {}
  void Check(bool ok, const std::string& what) {
    std::printf("%s rank %d: %s\n", ok ? "PASS" : "FAIL", rank_, what.c_str());
    std::fflush(stdout);
    if (!ok) ++failures_;
  }
  int failures() const { return failures_; }

 private:
  int rank_;
  int failures_ = 0;
};

// Returns false when a collective failed: the world cannot go on.
bool CheckAllReduceSum(Communicator& comm, Checker& checker, int64_t n) {
  const int rank = comm.rank(), size = comm.size();
  std::vector<float> data = RandomFloats(Seed(rank, n, 1), n);
  absl::Status s = comm.AllReduceSum(data.data(), n);
  checker.Check(s.ok(), "AllReduceSum n=" + std::to_string(n) + " " + s.ToString());
  if (!s.ok()) return false;

  // Against the sum in double of every rank's data, regenerated here; the
  // bound is relative to the sum of magnitudes (float rounding of a sum).
  std::vector<double> sum(n, 0.0), magnitude(n, 0.0);
  for (int r = 0; r < size; ++r) {
    std::vector<float> theirs = RandomFloats(Seed(r, n, 1), n);
    for (int64_t i = 0; i < n; ++i) {
      sum[i] += theirs[i];
      magnitude[i] += std::fabs(theirs[i]);
    }
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i)
    if (!(std::fabs(data[i] - sum[i]) <= 1e-5 * std::max(magnitude[i], 1e-30))) ++bad;
  checker.Check(bad == 0, "AllReduceSum n=" + std::to_string(n) + " matches the double sum (" +
                              std::to_string(bad) + " off)");

  // Every rank must hold the same bits: gather them all and compare.
  std::vector<float> all(n * size);
  s = comm.AllGather(data.data(), all.data(), n);
  checker.Check(s.ok(), "AllGather of the sums " + s.ToString());
  if (!s.ok()) return false;
  bool same = true;
  for (int r = 0; r < size; ++r)
    same = same && std::memcmp(all.data() + r * n, data.data(), n * sizeof(float)) == 0;
  checker.Check(same, "AllReduceSum n=" + std::to_string(n) + " bit-identical on every rank");
  return true;
}

bool CheckAllGather(Communicator& comm, Checker& checker, int64_t n) {
  const int rank = comm.rank(), size = comm.size();
  std::vector<float> in = RandomFloats(Seed(rank, n, 2), n);
  std::vector<float> out(n * size, std::nanf(""));
  absl::Status s = comm.AllGather(in.data(), out.data(), n);
  checker.Check(s.ok(), "AllGather n=" + std::to_string(n) + " " + s.ToString());
  if (!s.ok()) return false;
  bool exact = true;
  for (int r = 0; r < size; ++r) {
    std::vector<float> theirs = RandomFloats(Seed(r, n, 2), n);
    exact = exact && std::memcmp(out.data() + r * n, theirs.data(), n * sizeof(float)) == 0;
  }
  checker.Check(exact, "AllGather n=" + std::to_string(n) + " exact, in rank order");
  return true;
}

bool CheckBroadcast(Communicator& comm, Checker& checker, int64_t bytes, int root) {
  std::vector<unsigned char> data = RandomBytes(Seed(comm.rank(), bytes, 3), bytes);
  absl::Status s = comm.Broadcast(data.data(), bytes, root);
  std::string what = "Broadcast bytes=" + std::to_string(bytes) + " root=" + std::to_string(root);
  checker.Check(s.ok(), what + " " + s.ToString());
  if (!s.ok()) return false;
  checker.Check(data == RandomBytes(Seed(root, bytes, 3), bytes), what + " exact");
  return true;
}

// A ring of point-to-point messages on both channels: each rank sends
// several messages of `bytes` to the next rank on each channel, interleaved
// (kSteps, kActivations, ...), and receives the previous rank's on the
// activations channel first: messages of a channel arrive in order and the
// channels never mix. Sends return before the receive is posted.
bool CheckSendRecv(Communicator& comm, Checker& checker, int64_t bytes) {
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  constexpr int kMessages = 3;
  using Channel = Communicator::Channel;
  std::string what = "Send/Recv ring bytes=" + std::to_string(bytes);
  for (int m = 0; m < kMessages; ++m)
    for (Channel ch : {Channel::kSteps, Channel::kActivations}) {
      std::vector<unsigned char> out =
          RandomBytes(Seed(comm.rank(), bytes, 10 + 2 * m + int(ch)), bytes);
      absl::Status s = comm.Send(out.data(), bytes, next, ch);
      checker.Check(s.ok(), what + " send " + s.ToString());
      if (!s.ok()) return false;
    }
  bool exact = true;
  for (Channel ch : {Channel::kActivations, Channel::kSteps})
    for (int m = 0; m < kMessages; ++m) {
      std::vector<unsigned char> in(static_cast<size_t>(bytes));
      absl::Status s = comm.Recv(in.data(), bytes, prev, ch);
      checker.Check(s.ok(), what + " recv " + s.ToString());
      if (!s.ok()) return false;
      exact &= in == RandomBytes(Seed(prev, bytes, 10 + 2 * m + int(ch)), bytes);
    }
  checker.Check(exact, what + " exact, in order per channel");
  absl::Status s = comm.Flush();
  checker.Check(s.ok(), what + " flush " + s.ToString());
  // A message of another size than expected is an error that names both.
  if (bytes == 1) {
    unsigned char two[2] = {1, 2};
    checker.Check(comm.Send(two, 2, next, Channel::kSteps).ok(), "Send of 2 bytes");
    unsigned char one[2] = {};
    absl::Status wrong = comm.Recv(one, 1, prev, Channel::kSteps);
    checker.Check(
        absl::IsDataLoss(wrong) && wrong.message().find("sent 2 bytes") != std::string_view::npos,
        "Recv of 1 byte where 2 came is DataLoss naming the sizes: " + wrong.ToString());
  }
  return true;
}

// Split into two groups (even and odd ranks), ordered by descending rank:
// sizes, ranks and an all-reduce within each group.
bool CheckSplit(Communicator& comm, Checker& checker) {
  const int color = comm.rank() % 2;
  absl::StatusOr<std::unique_ptr<Communicator>> group = comm.Split(color, -comm.rank());
  checker.Check(group.ok(), "Split " + group.status().ToString());
  if (!group.ok()) return false;
  int members = 0, above = 0;
  for (int r = 0; r < comm.size(); ++r)
    if (r % 2 == color) {
      ++members;
      above += r > comm.rank();
    }
  checker.Check((*group)->size() == members && (*group)->rank() == above,
                "Split group of " + std::to_string((*group)->size()) + ", rank " +
                    std::to_string((*group)->rank()));
  float x = float(comm.rank());
  absl::Status s = (*group)->AllReduceSum(&x, 1);
  float want = 0;
  for (int r = color; r < comm.size(); r += 2) want += float(r);
  checker.Check(s.ok() && x == want, "AllReduceSum within the split group");
  return s.ok();
}

// Checked on every rank alike before any communication, so no rank waits.
void CheckBadArguments(Communicator& comm, Checker& checker) {
  float x[4] = {};
  auto invalid = [](const absl::Status& s) { return absl::IsInvalidArgument(s); };
  checker.Check(invalid(comm.AllReduceSum(x, 0)), "AllReduceSum count 0 is InvalidArgument");
  checker.Check(invalid(comm.AllReduceSum(x, -3)), "AllReduceSum count -3 is InvalidArgument");
  checker.Check(invalid(comm.AllReduceSum(nullptr, 4)), "AllReduceSum null is InvalidArgument");
  checker.Check(invalid(comm.AllGather(x, nullptr, 1)), "AllGather null out is InvalidArgument");
  checker.Check(invalid(comm.Broadcast(x, 4, comm.size())), "Broadcast root=size is invalid");
  checker.Check(invalid(comm.Broadcast(nullptr, 4, 0)), "Broadcast null is InvalidArgument");
}

int RunChecks(Communicator& comm, const Options& options) {
  Checker checker(comm.rank());
  if (options.expect_size > 0)
    checker.Check(comm.size() == options.expect_size, "world size " + std::to_string(comm.size()) +
                                                          ", expected " +
                                                          std::to_string(options.expect_size));
  absl::StatusOr<Communicator*> again = MpiWorld(options.timeout);
  checker.Check(again.ok() && *again == &comm, "MpiWorld() returns the same world again");
  checker.Check(LaunchedAsMpiRank(), "LaunchedAsMpiRank() under mpirun");
  CheckBadArguments(comm, checker);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{65537}, int64_t{1 << 20} + 5})
    if (!CheckAllReduceSum(comm, checker, n)) return 1;
  for (int64_t n : {int64_t{1}, int64_t{777}, int64_t{300001}})
    if (!CheckAllGather(comm, checker, n)) return 1;
  for (int root : {1, comm.size() - 1})
    for (int64_t bytes : {int64_t{1}, int64_t{4097}, int64_t{3 << 20} + 1})
      if (!CheckBroadcast(comm, checker, bytes, root)) return 1;
  for (int64_t bytes : {int64_t{1}, int64_t{4097}, int64_t{3 << 20} + 1})
    if (!CheckSendRecv(comm, checker, bytes)) return 1;
  if (!CheckSplit(comm, checker)) return 1;
  if (checker.failures() == 0) std::printf("PASS rank %d: all checks\n", comm.rank());
  return checker.failures() == 0 ? 0 : 1;
}

// One rank fails to join; the collective must not come back on the others.
int RunFaulty(Communicator& comm, const Options& options) {
  const int rank = comm.rank();
  if (rank == options.kill_rank) {
    std::printf("rank %d: exiting before the collective\n", rank);
    std::fflush(stdout);
    _exit(9);
  }
  if (rank == options.hang_rank) {
    std::printf("rank %d: hanging instead of joining the collective\n", rank);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::hours(1));
    return 0;
  }
  std::vector<float> data(4096, 1.0f);
  absl::Status s = comm.AllReduceSum(data.data(), static_cast<int64_t>(data.size()));
  if (s.ok()) {
    std::printf("FAIL rank %d: AllReduceSum completed without every rank\n", rank);
    return 1;
  }
  std::printf("rank %d: AllReduceSum failed: %s\n", rank, s.ToString().c_str());
  return 2;
}

int Main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "missing value for %s\n", flag.c_str());
      return 2;
    }
    const char* value = argv[++i];
    if (flag == "--expect-size") {
      options.expect_size = std::atoi(value);
    } else if (flag == "--timeout") {
      options.timeout = std::atof(value);
    } else if (flag == "--kill-rank") {
      options.kill_rank = std::atoi(value);
    } else if (flag == "--hang-rank") {
      options.hang_rank = std::atoi(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  absl::StatusOr<Communicator*> world = MpiWorld(options.timeout);
  if (!world.ok()) {
    std::printf("FAIL: MpiWorld: %s\n", world.status().ToString().c_str());
    return 1;
  }
  if (options.kill_rank >= 0 || options.hang_rank >= 0) return RunFaulty(**world, options);
  return RunChecks(**world, options);
}

}  // namespace
}  // namespace llmc

int main(int argc, char** argv) { return llmc::Main(argc, argv); }
