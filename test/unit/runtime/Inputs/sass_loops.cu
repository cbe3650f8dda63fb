// A dot product per thread over n float4s: one loop with a 16-byte load.
extern "C" __global__ void dot4(const float4* __restrict__ a, const float4* __restrict__ b,
                                float* out, int n) {
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float4 x = a[i], y = b[i];
    acc += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
  }
  out[threadIdx.x] = acc;
}
// Bytes summed over a nested loop: 1-byte loads inside, a 2-byte store after.
extern "C" __global__ void sum_bytes(const unsigned char* __restrict__ p, unsigned short* out,
                                     int rows, int cols) {
  unsigned s = 0;
  for (int r = 0; r < rows; ++r) {
#pragma unroll 1
    for (int c = threadIdx.x; c < cols; c += 32) s += p[r * cols + c];
  }
  out[threadIdx.x] = (unsigned short)s;
}
