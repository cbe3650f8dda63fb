/* A program that links one library the runtime must never link (the CUDA
   driver, cuBLASLt or NCCL): check_runtime_links.cmake must refuse it, which
   shows that the check can fail (test/CMakeLists.txt). Built with
   LLMC_PROBE_STUB, the same file is the stub library that stands in for the
   real one (same file name, the one symbol defined), so no toolkit is needed.
   The symbol is only referenced, never called: nothing runs the probe. */
#if defined(LLMC_PROBE_CUDA)
#define PROBE_SYMBOL cuInit
#elif defined(LLMC_PROBE_CUBLASLT)
#define PROBE_SYMBOL cublasLtCreate
#elif defined(LLMC_PROBE_NCCL)
#define PROBE_SYMBOL ncclGetVersion
#endif

int PROBE_SYMBOL(void* arg);

#if defined(LLMC_PROBE_STUB)
int PROBE_SYMBOL(void* arg) { return arg == 0; }
#else
int main(void) {
  /* Taken, so that the linker keeps the library even with --as-needed. */
  void* volatile keep = (void*)&PROBE_SYMBOL;
  return keep == 0;
}
#endif
