// llmc-hash64, the artifact checksum (see Checksum64 in manifest.h).
#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"
#include "llmc/core/artifact/manifest.h"

namespace llmc {
namespace {

// XXH64's primes: odd, so multiplying by them is a bijection of uint64_t.
constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;

// Little-endian on every host, so the value is the same everywhere.
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// Bijective in `w` for a fixed `acc` and in `acc` for a fixed `w`.
inline uint64_t Round(uint64_t acc, uint64_t w) { return std::rotl(acc + w * kP2, 31) * kP1; }

}  // namespace

Checksum64::Checksum64() {
  for (int i = 0; i < 4; ++i) lanes_[i] = kP5 * static_cast<uint64_t>(i + 1);
  std::memset(pending_, 0, sizeof(pending_));
}

void Checksum64::Update(const uint8_t* data, uint64_t size) {
  if (size == 0) return;
  total_ += size;
  if (num_pending_ > 0) {
    uint64_t take = 32 - num_pending_ < size ? 32 - num_pending_ : size;
    std::memcpy(pending_ + num_pending_, data, take);
    num_pending_ += take;
    data += take;
    size -= take;
    if (num_pending_ < 32) return;
    for (int i = 0; i < 4; ++i) lanes_[i] = Round(lanes_[i], Load64(pending_ + 8 * i));
    num_pending_ = 0;
  }
  // Four independent dependency chains keep the multipliers busy.
  uint64_t v0 = lanes_[0], v1 = lanes_[1], v2 = lanes_[2], v3 = lanes_[3];
  for (; size >= 32; data += 32, size -= 32) {
    v0 = Round(v0, Load64(data));
    v1 = Round(v1, Load64(data + 8));
    v2 = Round(v2, Load64(data + 16));
    v3 = Round(v3, Load64(data + 24));
  }
  lanes_[0] = v0, lanes_[1] = v1, lanes_[2] = v2, lanes_[3] = v3;
  if (size > 0) {
    std::memcpy(pending_, data, size);
    num_pending_ = size;
  }
}

uint64_t Checksum64::Value() const {
  uint64_t h = kP5 + total_;
  for (int i = 0; i < 4; ++i) h = (h ^ Round(0, lanes_[i])) * kP1 + kP4;
  const uint8_t* p = pending_;
  uint64_t n = num_pending_;
  for (; n >= 8; p += 8, n -= 8) h = std::rotl(h ^ Round(0, Load64(p)), 27) * kP1 + kP4;
  if (n > 0) {
    uint64_t w = 0;
    for (uint64_t i = 0; i < n; ++i) w |= static_cast<uint64_t>(p[i]) << (8 * i);
    h = std::rotl(h ^ Round(0, w), 23) * kP2 + kP3;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

std::string Checksum64::Hex() const { return absl::StrFormat("%016x", Value()); }

std::string ChecksumHex(const uint8_t* data, uint64_t size) {
  Checksum64 sum;
  sum.Update(data, size);
  return sum.Hex();
}

}  // namespace llmc
