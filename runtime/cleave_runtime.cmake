# Included by a project that links the Cleave runtime (a bundle's generated CMakeLists, runtime/bench), after its
# project(... LANGUAGES CXX): sets cleave_rt to the target of the backend CLEAVE_BACKEND (cpu or cuda; a cache
# variable the includer may preset), enabling CUDA for cuda. The target is a prebuilt runtime when CLEAVE_RUNTIME_DIR
# names a directory holding libcleave_rt_<backend>.a (headers in CLEAVE_RUNTIME_INCLUDE, default the include/ beside
# this file), else the runtime sources beside this file, built here.
set(CLEAVE_BACKEND cpu CACHE STRING "runtime backend: cpu or cuda")
set_property(CACHE CLEAVE_BACKEND PROPERTY STRINGS cpu cuda)
if(CLEAVE_BACKEND STREQUAL "cuda")
  if(NOT CLEAVE_RUNTIME_DIR AND NOT EXISTS "${CMAKE_CURRENT_LIST_DIR}/cuda")
    message(FATAL_ERROR "CLEAVE_BACKEND=cuda: this runtime has no cuda backend (${CMAKE_CURRENT_LIST_DIR}/cuda is missing)")
  endif()
  include(${CMAKE_CURRENT_LIST_DIR}/cleave_cuda.cmake)
  cleave_find_nvcc()
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "CLEAVE_BACKEND=cuda: nvcc not found (put it on PATH or set CMAKE_CUDA_COMPILER)")
  endif()
  cleave_enable_cuda()
  set(CLEAVE_RUNTIME_SKIP_CPU ON)
elseif(NOT CLEAVE_BACKEND STREQUAL "cpu")
  message(FATAL_ERROR "CLEAVE_BACKEND=${CLEAVE_BACKEND}: expected cpu or cuda")
endif()
set(cleave_rt cleave_rt_${CLEAVE_BACKEND})
set(CLEAVE_RUNTIME_DIR "" CACHE PATH "prebuilt runtime library directory")
set(CLEAVE_RUNTIME_INCLUDE "${CMAKE_CURRENT_LIST_DIR}/include" CACHE PATH "runtime headers")
if(CLEAVE_RUNTIME_DIR)
  find_package(MPI REQUIRED COMPONENTS CXX)
  find_package(Threads REQUIRED)
  add_library(${cleave_rt} STATIC IMPORTED)
  set_target_properties(${cleave_rt} PROPERTIES IMPORTED_LOCATION "${CLEAVE_RUNTIME_DIR}/lib${cleave_rt}.a")
  target_include_directories(${cleave_rt} INTERFACE "${CLEAVE_RUNTIME_INCLUDE}")
  if(CLEAVE_BACKEND STREQUAL "cuda")
    find_package(CUDAToolkit REQUIRED)
    find_library(CLEAVE_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
                 ENV CUDNN_ROOT PATH_SUFFIXES lib lib64 REQUIRED)
    find_library(CLEAVE_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
                 ENV NCCL_ROOT PATH_SUFFIXES lib lib64 REQUIRED)
    find_path(CLEAVE_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_ROOT
              PATH_SUFFIXES include REQUIRED)
    target_include_directories(${cleave_rt} INTERFACE ${CLEAVE_CUDNN_INCLUDE_DIR})
    target_link_libraries(${cleave_rt} INTERFACE MPI::MPI_CXX Threads::Threads CUDA::cudart_static CUDA::cublas
                          ${CLEAVE_CUDNN_LIBRARY} ${CLEAVE_NCCL_LIBRARY})
    target_compile_options(${cleave_rt} INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda>)
  else()
    find_library(CLEAVE_OPENBLAS_LIBRARY NAMES openblas)
    target_link_libraries(${cleave_rt} INTERFACE MPI::MPI_CXX Threads::Threads ${CLEAVE_OPENBLAS_LIBRARY})
  endif()
else()
  add_subdirectory(${CMAKE_CURRENT_LIST_DIR} ${CMAKE_BINARY_DIR}/runtime)
endif()
