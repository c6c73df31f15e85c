# Install rules and the exported CMake package et_copy, so an executor can
#   find_package(et_copy 0.1 CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE et_copy::runtime)   # + et_copy::simulated, et_copy::cuda, et_copy::aoti
#
# Layouts:
#  - inside the Python wheel (scikit-build-core): everything under et_copy/
#    in site-packages, beside the Python package and next to executorch/,
#    which the package config looks for relative to its own location;
#  - a plain `cmake --install`: the usual lib/, include/, lib/cmake/et_copy.
# With add_subdirectory the targets et_copy::runtime, et_copy::simulated,
# et_copy::cuda and et_copy::aoti exist as aliases and nothing here is needed; ET_COPY_INSTALL defaults OFF then.

include(CMakePackageConfigHelpers)

if(SKBUILD)
  set(_et_copy_install_default ON)
else()
  set(_et_copy_install_default ${PROJECT_IS_TOP_LEVEL})
endif()
option(ET_COPY_INSTALL "Install the C++ library, headers and CMake package"
       ${_et_copy_install_default})

if(NOT ET_COPY_INSTALL)
  return()
endif()

if(SKBUILD)
  set(ET_COPY_INSTALL_LIBDIR et_copy/lib)
  set(ET_COPY_INSTALL_INCLUDEDIR et_copy/include)
else()
  set(ET_COPY_INSTALL_LIBDIR ${CMAKE_INSTALL_LIBDIR})
  set(ET_COPY_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
endif()
set(ET_COPY_INSTALL_CMAKEDIR ${ET_COPY_INSTALL_LIBDIR}/cmake/et_copy)

install(TARGETS et_copy_runtime
  EXPORT et_copyTargets
  LIBRARY DESTINATION ${ET_COPY_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${ET_COPY_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${ET_COPY_INSTALL_INCLUDEDIR})
# The simulated device's backend needs nothing beyond the runtime, so it is
# in the same export set. et_copy::simulated is et_copy::simulated_library
# (the archive) with the object that describes the backend when a program
# links it (backends/simulated/CMakeLists.txt).
install(TARGETS et_copy_simulated et_copy_simulated_description et_copy_simulated_linked
  EXPORT et_copyTargets
  ARCHIVE DESTINATION ${ET_COPY_INSTALL_LIBDIR}
  OBJECTS DESTINATION ${ET_COPY_INSTALL_LIBDIR}/et_copy_objects
  INCLUDES DESTINATION ${ET_COPY_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/backends/simulated/include/et_copy/simulated_device_backend.h
  DESTINATION ${ET_COPY_INSTALL_INCLUDEDIR}/et_copy)
install(EXPORT et_copyTargets
  NAMESPACE et_copy::
  DESTINATION ${ET_COPY_INSTALL_CMAKEDIR})

# The CUDA allocator is its own export set: its targets file references
# CUDA::cudart_static, so a consumer without the toolkit can still load the
# package and use et_copy::runtime.
set(ET_COPY_PACKAGE_HAS_CUDA OFF)
if(TARGET et_copy_cuda)
  set(ET_COPY_PACKAGE_HAS_CUDA ON)
  install(TARGETS et_copy_cuda
    EXPORT et_copyCudaTargets
    ARCHIVE DESTINATION ${ET_COPY_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${ET_COPY_INSTALL_INCLUDEDIR})
  install(EXPORT et_copyCudaTargets
    NAMESPACE et_copy::
    DESTINATION ${ET_COPY_INSTALL_CMAKEDIR})
endif()

# The compiled backend is its own export set too: it links libtorch, which
# the package config finds on the consumer's machine (the torch this build
# used may be a deleted build-isolation folder), so a consumer without torch
# can still use et_copy::runtime.
set(ET_COPY_PACKAGE_HAS_AOTI OFF)
set(ET_COPY_PACKAGE_TORCH_VERSION "")
set(ET_COPY_PACKAGE_TORCH_ROOT "")
if(TARGET et_copy_aoti)
  set(ET_COPY_PACKAGE_HAS_AOTI ON)
  # et_copy::aoti is et_copy::aoti_library (the archive) with the object that
  # registers the backend when a program links it (backends/aoti/CMakeLists.txt).
  install(TARGETS et_copy_aoti et_copy_aoti_registration et_copy_aoti_linked
    EXPORT et_copyAotiTargets
    ARCHIVE DESTINATION ${ET_COPY_INSTALL_LIBDIR}
    OBJECTS DESTINATION ${ET_COPY_INSTALL_LIBDIR}/et_copy_objects
    INCLUDES DESTINATION ${ET_COPY_INSTALL_INCLUDEDIR})
  install(EXPORT et_copyAotiTargets
    NAMESPACE et_copy::
    DESTINATION ${ET_COPY_INSTALL_CMAKEDIR})
  install(FILES
    ${PROJECT_SOURCE_DIR}/backends/aoti/include/et_copy/aoti_backend.h
    ${PROJECT_SOURCE_DIR}/backends/aoti/include/et_copy/code_trust.h
    DESTINATION ${ET_COPY_INSTALL_INCLUDEDIR}/et_copy)
  get_target_property(ET_COPY_PACKAGE_TORCH_VERSION et_copy_aoti ET_COPY_TORCH_VERSION)
  # As for executorch below: a plain install remembers where torch was, a
  # wheel looks beside itself in site-packages.
  if(NOT SKBUILD)
    get_target_property(ET_COPY_PACKAGE_TORCH_ROOT et_copy_aoti ET_COPY_TORCH_ROOT)
  endif()
endif()

set(_et_copy_headers
  backend_frame.h
  backend_options.h
  copy_ops.h
  counting_device_allocator.h
  cuda_stream.h
  delegate_record.h
  device_arguments.h
  device_backend.h
  device_residency.h
  failure_report.h
  instruction_tracer.h
  limits.h
  llm_methods.h
  loaded_method.h
  loaded_program.h
  log_capture.h
  planned_buffer.h
  program_check.h
  program_record.h
  registration.h
  sessions.h
  simulated_device_allocator.h
  tensor_layout.h)
if(ET_COPY_PACKAGE_HAS_CUDA)
  list(APPEND _et_copy_headers cuda_device_allocator.h)
endif()
list(TRANSFORM _et_copy_headers PREPEND ${PROJECT_SOURCE_DIR}/runtime/include/et_copy/)
install(FILES ${_et_copy_headers} DESTINATION ${ET_COPY_INSTALL_INCLUDEDIR}/et_copy)

# The ExecuTorch version we compiled against: its C++ ABI is not stable
# across releases, so the package asks for exactly this one.
set(ET_COPY_EXECUTORCH_VERSION ${executorch_VERSION})
# A plain install may remember where executorch was at build time. A wheel
# must not: under build isolation that folder is deleted, and a search path
# into a deleted temporary folder is one somebody else could fill
# (docs/design.md, sharp edge 4).
if(SKBUILD)
  set(ET_COPY_PACKAGE_IN_WHEEL TRUE)
  set(ET_COPY_EXECUTORCH_PREFIX "")
else()
  set(ET_COPY_PACKAGE_IN_WHEEL FALSE)
  # <prefix>/executorch/lib/cmake/executorch -> <prefix>
  get_filename_component(ET_COPY_EXECUTORCH_PREFIX "${executorch_DIR}/../../../.." ABSOLUTE)
endif()

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/et_copyConfig.cmake.in
  ${PROJECT_BINARY_DIR}/et_copyConfig.cmake
  INSTALL_DESTINATION ${ET_COPY_INSTALL_CMAKEDIR})
if(ET_COPY_PACKAGE_HAS_AOTI)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/et_copyTorch.cmake.in ${PROJECT_BINARY_DIR}/et_copyTorch.cmake @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/et_copyTorch.cmake DESTINATION ${ET_COPY_INSTALL_CMAKEDIR})
endif()
# 0.x releases break between minors, so 0.1 accepts 0.1.* only.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/et_copyConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/et_copyConfig.cmake
  ${PROJECT_BINARY_DIR}/et_copyConfigVersion.cmake
  DESTINATION ${ET_COPY_INSTALL_CMAKEDIR})
