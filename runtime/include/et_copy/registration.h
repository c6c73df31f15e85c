// Explicit, idempotent registration of et-copy's kernels, allocators and
// backends with ExecuTorch's registries: the kernels and allocators
// (registries.h) and the simulated device backend, whose registration is
// declared beside it (simulated_device_backend.h). Each backend of its own
// folder declares its own (aoti_backend.h: register_aoti_backend).
#pragma once

#include <et_copy/registries.h>
#include <et_copy/simulated_device_backend.h>
