//===- kernel_check_harness.cu - result table, CUDA errors, weights -------===//
//
// The host side of test/gpu/kernel_check shared by every check: the result
// table, the CUDA error exit, random GGUF weights, the error measure and its
// report, and the double-precision rms_norm.
//
//===----------------------------------------------------------------------===//
#include "kernel_check.cuh"

std::vector<Row> g_rows;

void print_table() {
  std::printf("\n%-34s %-44s %-11s %10s %10s %8s  %s\n", "kernel", "shape", "dtype", "err/host",
              "err/f64", "tol", "result");
  std::printf("%s\n", std::string(130, '-').c_str());
  int fails = 0;
  for (const Row& r : g_rows) {
    char f64[32];
    if (std::isnan(r.err_f64)) std::snprintf(f64, sizeof f64, "-");
    else std::snprintf(f64, sizeof f64, "%.2e", r.err_f64);
    std::printf("%-34s %-44s %-11s %10.2e %10s %8.0e  %s\n", r.kernel.c_str(), r.shape.c_str(),
                r.dtype.c_str(), r.err_host, f64, r.tol, r.pass ? "PASS" : "FAIL");
    fails += !r.pass;
  }
  std::printf("%s\n%zu checks, %d failed (err = max |gpu - ref| / max |ref| per output tensor)\n",
              std::string(130, '-').c_str(), g_rows.size(), fails);
}

[[noreturn]] void cuda_fatal(const char* what, cudaError_t e, const char* file, int line) {
  std::fprintf(stderr, "\nCUDA ERROR: %s failed at %s:%d: %s (%s)\n", what, file, line,
               cudaGetErrorString(e), cudaGetErrorName(e));
  std::fprintf(stderr, "(the checks after the last table row did not run)\n");
  print_table();
  std::exit(2);
}

static uint16_t f16_bits(float v) {
  const __half h = __float2half_rn(v);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// GGUF q4_1 / q8_0 blocks: random quants, f16 scales (and q4_1 mins) of
// random sign and magnitude in [0.005, 0.1] (RandomWeights in
// test/unit/kernels/host_kernels_test_util.h; divided by 8 for q8_0).
std::vector<uint8_t> random_weights(ref::WFmt f, int64_t rows, int64_t K, std::mt19937& rng) {
  const int bb = f == ref::WFmt::q4_1 ? 20 : 34;
  const size_t bytes = static_cast<size_t>(rows * (K / 32) * bb);
  std::vector<uint8_t> w(bytes);
  for (size_t i = 0; i < bytes; i += 4) {
    const uint32_t r = rng();
    std::memcpy(w.data() + i, &r, std::min<size_t>(4, bytes - i));
  }
  // q8_0 scales 8x smaller: |w| <= 1.6 as for q4_1 (with the RandomWeights
  // range, q8_0 weights reach +-12.7 and silu(g) * u overflows f16).
  const float div = f == ref::WFmt::q8_0 ? 8.0f : 1.0f;
  std::uniform_real_distribution<float> mag(0.005f / div, 0.1f / div);
  const int64_t blocks = rows * (K / 32);
  for (int64_t b = 0; b < blocks; ++b)
    for (int off = 0; off < (f == ref::WFmt::q4_1 ? 4 : 2); off += 2) {
      const float v = (rng() & 1 ? 1.0f : -1.0f) * mag(rng);
      const uint16_t h = f16_bits(v);
      std::memcpy(w.data() + b * bb + off, &h, 2);
    }
  return w;
}

// Max |got - ref| / max |ref|; NaN or Inf in got gives +inf.
template <class R> static double rel_err(const std::vector<float>& got, const R* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(double(got[i]) - double(ref[i])));
    den = std::max(den, std::fabs(double(ref[i])));
  }
  return den > 0 ? num / den : num;
}

// Records a row; on failure prints where the errors are (width = columns).
void report(const std::string& kernel, const std::string& shape, const std::string& dtype,
            const std::vector<float>& got, const std::vector<float>& host, const std::vector<double>* f64,
            double tol, int width) {
  const size_t n = got.size();
  if (host.size() != n || (f64 && f64->size() != n)) {
    std::printf("INTERNAL: size mismatch in %s\n", kernel.c_str());
    std::exit(3);
  }
  const double eh = rel_err(got, host.data(), n);
  const double ef = f64 ? rel_err(got, f64->data(), n) : NAN;
  const bool pass = eh <= tol && (!f64 || ef <= tol);
  g_rows.push_back({kernel, shape, dtype, eh, ef, tol, pass});
  if (f64) { // the two references must agree far below the tolerance
    const double hf = rel_err(host, f64->data(), n);
    if (!(hf <= tol / 4))
      std::printf("  HARNESS WARNING: %s %s: host kernel vs f64 reference differ by %.2e\n", kernel.c_str(),
                  shape.c_str(), hf);
  }
  std::printf("  %-34s %-44s %-11s err/host %.2e err/f64 %.2e  %s\n", kernel.c_str(), shape.c_str(),
              dtype.c_str(), eh, ef, pass ? "PASS" : "FAIL");
  if (pass) return;
  // Failure detail: count of bad elements, first few, bad rows and columns.
  double den = 0;
  for (size_t i = 0; i < n; ++i) den = std::max(den, std::fabs(double(host[i])));
  const double lim = tol * (den > 0 ? den : 1);
  size_t bad = 0;
  std::vector<int> bad_rows, bad_cols;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(got[i]) - double(host[i]));
    if (!(d <= lim)) {
      if (bad < 8)
        std::printf("      [t=%zu, n=%zu] gpu %.6g host %.6g%s\n", i / width, i % width, got[i], host[i],
                    f64 ? (" f64 " + std::to_string((*f64)[i])).c_str() : "");
      ++bad;
      const int r = static_cast<int>(i / width), c = static_cast<int>(i % width);
      if (bad_rows.empty() || bad_rows.back() != r) bad_rows.push_back(r);
      if (std::find(bad_cols.begin(), bad_cols.end(), c) == bad_cols.end() && bad_cols.size() < 4096)
        bad_cols.push_back(c);
    }
  }
  std::sort(bad_cols.begin(), bad_cols.end());
  bad_rows.erase(std::unique(bad_rows.begin(), bad_rows.end()), bad_rows.end());
  std::printf("      %zu of %zu elements off by more than tol * max|ref| (%.3g); %zu distinct rows, "
              "%zu distinct columns; rows:", bad, n, lim, bad_rows.size(), bad_cols.size());
  for (size_t i = 0; i < std::min<size_t>(bad_rows.size(), 12); ++i) std::printf(" %d", bad_rows[i]);
  std::printf("%s; columns:", bad_rows.size() > 12 ? " ..." : "");
  for (size_t i = 0; i < std::min<size_t>(bad_cols.size(), 16); ++i) std::printf(" %d", bad_cols[i]);
  std::printf("%s\n", bad_cols.size() > 16 ? " ..." : "");
}

std::vector<double> f64_rms_norm(const std::vector<float>& x, int T, const float* w) {
  std::vector<double> y(static_cast<size_t>(T) * H);
  for (int t = 0; t < T; ++t) {
    double ss = 0;
    for (int k = 0; k < H; ++k) ss += double(x[t * H + k]) * x[t * H + k];
    const double r = 1.0 / std::sqrt(ss / H + double(kEps));
    for (int k = 0; k < H; ++k) y[t * H + k] = double(x[t * H + k]) * r * w[k];
  }
  return y;
}
