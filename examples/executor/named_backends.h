// The device backends a program's delegates name, registered before the
// program loads: ExecuTorch resolves each delegate's backend by name when
// a method loads, and its registry aborts on a second registration of a
// name, so each is registered once, through et-copy's idempotent calls.
#pragma once

#include <string>

#include <et_copy/failure_report.h>

/// Reads the backend ids the delegates of the program at `path` name
/// (et_copy::delegate_backend_ids) and registers each of et-copy's device
/// backends among them that is not registered yet: AotiDeviceBackend, when
/// this executor was built with et_copy::aoti (register_device() has
/// already registered SimulatedDeviceBackend on the simulated device).
/// Prints a line per backend it registers. Returns false, with a message on
/// stderr, when the program names AotiDeviceBackend and this executor was
/// built without it, or when its registration fails. A file that cannot be
/// read returns true: loading it reports why.
bool register_named_backends(const std::string& path);

/// After a failed load: when it failed with AccessFailed, the way
/// AotiDeviceBackend refuses compiled code this machine did not compile
/// (code_trust.h), says on stderr that --trust-code runs it.
void hint_trust_code(const et_copy::FailureReport& report);
