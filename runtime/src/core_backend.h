// What the core's own device backend (SimulatedDeviceBackend) puts in the
// tables that backend libraries add to with register_payload_kind and
// describe_device_backend: the core's entries are there from the start, so
// records of its payload kind parse and refusals name its registration
// before anything registers.
#pragma once

#include <et_copy/delegate_record.h>
#include <et_copy/device_backend.h>

namespace et_copy::internal {

/// The nested program's rules (kPayloadProgram).
PayloadRules program_payload_rules();

/// How to register the simulated backend, and where it runs.
DeviceBackendHelp simulated_backend_help();

} // namespace et_copy::internal
