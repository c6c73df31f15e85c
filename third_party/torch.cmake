# Finds the torch wheel's C++ headers and the libraries the bindings link
# (libtorch_python, libtorch_cpu, libc10), from the Python that
# configures the build: under scikit-build-core the isolated build
# environment's torch (executorch pins it), elsewhere whatever torch that
# Python has. Not torch's TorchConfig.cmake: it wants a CUDA toolkit matching
# a CUDA build of torch, and the bindings need none of it.
#
# Defines ET_COPY_TORCH_ROOT (the torch package folder), ET_COPY_TORCH_VERSION
# (torch.__version__), ET_COPY_TORCH_INCLUDE_DIRS, ET_COPY_TORCH_DEFINITIONS,
# ET_COPY_TORCH_LIB_DIR, ET_COPY_TORCH_LIBRARIES (what the bindings link) and
# ET_COPY_TORCH_SHIM_LIBRARIES (torch_cpu and c10: the aoti_torch_* C shims,
# what backends/aoti links).

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__)"
  OUTPUT_VARIABLE _et_copy_torch OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_VARIABLE _et_copy_torch_error
  RESULT_VARIABLE _et_copy_torch_result)
if(NOT _et_copy_torch_result EQUAL 0)
  message(FATAL_ERROR
    "et_copy's bindings read torch tensors through libtorch, but ${Python_EXECUTABLE} cannot import torch: "
    "pip install torch==2.13.0 (executorch 1.5.1's pin)\n${_et_copy_torch_error}")
endif()
string(REPLACE "\n" ";" _et_copy_torch "${_et_copy_torch}")
list(GET _et_copy_torch 0 _et_copy_torch_root)
list(GET _et_copy_torch 1 _et_copy_torch_abi)
list(GET _et_copy_torch 2 ET_COPY_TORCH_VERSION)
set(ET_COPY_TORCH_ROOT "${_et_copy_torch_root}")

set(ET_COPY_TORCH_INCLUDE_DIRS "${_et_copy_torch_root}/include"
                               "${_et_copy_torch_root}/include/torch/csrc/api/include")
set(ET_COPY_TORCH_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${_et_copy_torch_abi}")
set(ET_COPY_TORCH_LIB_DIR "${_et_copy_torch_root}/lib")
set(ET_COPY_TORCH_LIBRARIES)
foreach(_lib torch_python torch_cpu c10)
  set(_path "${ET_COPY_TORCH_LIB_DIR}/lib${_lib}.so")
  if(NOT EXISTS "${_path}")
    message(FATAL_ERROR "torch at ${_et_copy_torch_root} has no lib${_lib}.so")
  endif()
  list(APPEND ET_COPY_TORCH_LIBRARIES "${_path}")
endforeach()
set(ET_COPY_TORCH_SHIM_LIBRARIES "${ET_COPY_TORCH_LIB_DIR}/libtorch_cpu.so" "${ET_COPY_TORCH_LIB_DIR}/libc10.so")
message(STATUS "et_copy: torch ${ET_COPY_TORCH_VERSION} from ${_et_copy_torch_root}")
