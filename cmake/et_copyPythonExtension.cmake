# What every Python extension of the build shares: the interpreter's headers,
# pybind11, and et_copy_add_backend_extension() for a device backend's own
# extension. Included by the top-level CMakeLists.txt when it builds Python
# (before the backends' folders, which call it).
find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
find_package(pybind11 CONFIG REQUIRED)

# et_copy_add_backend_extension(<name> PACKAGE <folder under et_copy/>
#                               SOURCES <source>... [LINK <target>...] [TORCH])
# A device backend's own extension (its folder's bindings/): a pybind11
# module linking the shared runtime, libet_copy_runtime.so, so that what it
# registers lands in the tables et_copy._C's loads walk, and LINK (the
# backend's library). Installed as et_copy.<PACKAGE with dots>.<name>, it
# finds the runtime in et_copy/lib and executorch's (and with TORCH, torch's)
# libraries beside et_copy in site-packages. backend_error.h gives it
# et_copy.EtCopyError. The development package (python/CMakeLists.txt) gets
# a copy too.
function(et_copy_add_backend_extension name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "TORCH" "PACKAGE" "SOURCES;LINK")
  pybind11_add_module(${name} MODULE ${arg_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/python/bindings)
  target_link_libraries(${name} PRIVATE et_copy_runtime ${arg_LINK})
  target_compile_options(${name} PRIVATE ${ET_COPY_WARNINGS})
  # et_copy/<package>/ -> et_copy/: one ".." per folder.
  string(REGEX REPLACE "[^/]+" ".." _up "${arg_PACKAGE}")
  set(_rpath "$ORIGIN/${_up}/lib;$ORIGIN/${_up}/../executorch/lib")
  set(_build_rpath "${ET_COPY_EXECUTORCH_LIB_DIR}")
  if(arg_TORCH)
    list(APPEND _rpath "$ORIGIN/${_up}/../torch/lib")
    list(APPEND _build_rpath "${ET_COPY_TORCH_LIB_DIR}")
  endif()
  set_target_properties(${name} PROPERTIES INSTALL_RPATH "${_rpath}" BUILD_RPATH "${_build_rpath}"
                                           ET_COPY_PACKAGE "${arg_PACKAGE}")
  install(TARGETS ${name} LIBRARY DESTINATION et_copy/${arg_PACKAGE})
  set_property(GLOBAL APPEND PROPERTY ET_COPY_BACKEND_EXTENSIONS ${name})
endfunction()
