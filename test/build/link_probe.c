/* A program that links one library the runtime must never link (the CUDA
   driver, cuBLAS or NCCL): check_runtime_links.cmake must refuse it, which
   shows that the check can fail (test/CMakeLists.txt). The symbol is only
   referenced, never called: nothing runs this. */
#if defined(LLMC_PROBE_CUDA)
int cuInit(unsigned int flags);
#define PROBE_SYMBOL cuInit
#elif defined(LLMC_PROBE_CUBLAS)
int cublasLtCreate(void** handle);
#define PROBE_SYMBOL cublasLtCreate
#elif defined(LLMC_PROBE_NCCL)
int ncclGetVersion(int* version);
#define PROBE_SYMBOL ncclGetVersion
#endif

int main(void) {
  /* Taken, so that the linker keeps the library even with --as-needed. */
  void* volatile keep = (void*)&PROBE_SYMBOL;
  return keep == 0;
}
