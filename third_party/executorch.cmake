# Finds the executorch wheel's C++ runtime (libexecutorch.so and headers).
#
# Under scikit-build-core the build environment's site-packages is already on
# CMAKE_PREFIX_PATH. In a plain CMake build we ask the Python interpreter
# where executorch is installed, unless executorch_DIR or CMAKE_PREFIX_PATH
# already point at it.
#
# Defines et_copy_executorch_runtime: libexecutorch.so with its headers and
# compile definitions, but without the imported target's link options, which
# bake the absolute path of the wheel we configured against into RUNPATH
# (under build isolation a deleted temporary folder; see docs/design.md, sharp
# edge 4).

if(NOT executorch_DIR)
  find_package(Python COMPONENTS Interpreter QUIET)
  if(Python_Interpreter_FOUND)
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -c
              "import importlib.util as u, os; s = u.find_spec('executorch'); print(os.path.dirname(list(s.submodule_search_locations)[0]) if s and s.submodule_search_locations else '')"
      OUTPUT_VARIABLE _et_copy_site OUTPUT_STRIP_TRAILING_WHITESPACE
      ERROR_QUIET)
    if(_et_copy_site)
      list(APPEND CMAKE_PREFIX_PATH "${_et_copy_site}")
    endif()
  endif()
endif()

find_package(executorch CONFIG QUIET)
if(NOT TARGET executorch::runtime)
  message(FATAL_ERROR
    "et_copy needs the ExecuTorch C++ runtime (executorch::runtime), which ships "
    "in the executorch wheel: pip install executorch==1.5.1, then configure with "
    "the same Python on PATH, or pass -Dexecutorch_DIR=<site-packages>/executorch/lib/cmake/executorch. "
    "Its imported targets need CMake >= 3.28 (this is ${CMAKE_VERSION}).")
endif()

get_target_property(_et_copy_et_lib executorch::runtime IMPORTED_LOCATION)
get_filename_component(ET_COPY_EXECUTORCH_LIB_DIR "${_et_copy_et_lib}" DIRECTORY)

add_library(et_copy_executorch_runtime INTERFACE)
target_link_libraries(et_copy_executorch_runtime INTERFACE "${_et_copy_et_lib}")
target_include_directories(et_copy_executorch_runtime SYSTEM INTERFACE
  $<TARGET_PROPERTY:executorch::runtime,INTERFACE_INCLUDE_DIRECTORIES>)
target_compile_definitions(et_copy_executorch_runtime INTERFACE
  $<TARGET_PROPERTY:executorch::runtime,INTERFACE_COMPILE_DEFINITIONS>)
target_compile_features(et_copy_executorch_runtime INTERFACE cxx_std_17)

# et_copy_executorch_etdump: libexecutorch_etdump.so, ExecuTorch's ETDump
# profiler (executorch::etdump::ETDumpGen, an EventTracer; header
# <executorch/devtools/etdump/etdump_flatcc.h>), defined the same way, when
# the wheel ships it (its CMake component `etdump`). et_copy_runtime does not
# link it; a target that writes ETDump profiles links this beside it. A
# consumer of the installed package links executorch::etdump instead.
if(TARGET executorch::etdump)
  get_target_property(_et_copy_etdump_lib executorch::etdump IMPORTED_LOCATION)
  add_library(et_copy_executorch_etdump INTERFACE)
  target_link_libraries(et_copy_executorch_etdump INTERFACE "${_et_copy_etdump_lib}" et_copy_executorch_runtime)
endif()
