# CUDA for a project that builds Cleave's CUDA runtime: the compiler's tree (CLEAVE_ENABLE_CUDA), a bundle or
# runtime/bench configured with CLEAVE_BACKEND=cuda (cleave_runtime.cmake). Macros, so that what they set and enable
# is the including directory's.
#
# cleave_find_nvcc(): CMAKE_CUDA_COMPILER (cached) from nvcc on PATH, else under CUDA_HOME, CUDA_PATH or
# /usr/local/cuda (DESIGN §8), unless it is set; left unset when there is none.
macro(cleave_find_nvcc)
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(CLEAVE_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES bin)
    if(CLEAVE_NVCC)
      set(CMAKE_CUDA_COMPILER ${CLEAVE_NVCC} CACHE FILEPATH "CUDA compiler")
    endif()
  endif()
endmacro()

# cleave_enable_cuda(): enables CUDA with C++20 for CUDA sources, for Ampere and Hopper (80 90) unless
# -DCMAKE_CUDA_ARCHITECTURES or the environment's CUDAARCHS (read by enable_language; `cleave run` and `cleave
# profile` pass no flag for it) choose.
macro(cleave_enable_cuda)
  if(NOT CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  # CMake 3.25 knows nvcc's flag for C++17 but not for C++20 (nvcc 12+ takes -std=c++20): without it targets with
  # CUDA_STANDARD 20 (or CXX_STANDARD 20, which CUDA falls back to) fail to configure.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endmacro()
