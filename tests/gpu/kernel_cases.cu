// The CUDA build of kernel_cases.cpp (CMake compiles a file in one language per target).
#include "kernel_cases.cpp"
