#include <et_copy/device_backend.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include <et_copy/counting_device_allocator.h>
#include <et_copy/device_residency.h>
#include <et_copy/limits.h>
#include <et_copy/program_check.h>
#include <executorch/runtime/platform/log.h>

#include "registry_lock.h"

namespace et_copy {

using executorch::runtime::Error;
using executorch::runtime::Result;

namespace {

// et-copy's table of device backends, in registration order, under
// registry_mutex(). Leaked on purpose: read during static destruction.
std::vector<DeviceBackend*>& table() {
  static auto* t = new std::vector<DeviceBackend*>();
  return *t;
}

void add_locked(DeviceBackend& backend) {
  for (DeviceBackend* b : table()) {
    if (b == &backend) {
      return;
    }
  }
  table().push_back(&backend);
}

} // namespace

Error DeviceBackend::reset_state(int session) {
  const Error e = reset_arena(id(), session);
  if (e == Error::NotFound) {
    ET_LOG(Error, "%s: session %d has no device state (no method with state is loaded)", id(), session);
  } else if (e != Error::Ok) {
    ET_LOG(Error, "%s: session %d: writing the start state failed", id(), session);
  }
  return e;
}

size_t DeviceBackend::state_nbytes(int session) const {
  return arena_nbytes(id(), session);
}

void DeviceBackend::release_pool(int pool) {
  et_copy::release_pool(pool);
}

Registration register_device_backend(DeviceBackend& backend, Error* error) {
  auto failed = [error](Error e) {
    if (error != nullptr) {
      *error = e;
    }
    return Registration::kFailed;
  };
  if (error != nullptr) {
    *error = Error::Ok;
  }
  const char* id = backend.id();
  if (id == nullptr || id[0] == '\0' || std::strlen(id) > kMaxDeviceBackendIdLength) {
    return failed(Error::InvalidArgument);
  }
  std::lock_guard<std::mutex> lock(internal::registry_mutex());
  executorch::runtime::BackendInterface* current = executorch::runtime::get_backend_class(id);
  if (current == &backend) {
    add_locked(backend);
    return Registration::kAlreadyOurs;
  }
  if (current != nullptr) {
    return Registration::kAlreadyOther;
  }
  if (table().size() >= kMaxDeviceBackends) {
    return failed(Error::NotSupported); // a session could not pass it its specs
  }
  // The registry keeps the struct's name and backend pointers: both live for the process.
  static auto* entries = new std::vector<std::unique_ptr<executorch::runtime::Backend>>();
  entries->push_back(std::make_unique<executorch::runtime::Backend>(executorch::runtime::Backend{id, &backend}));
  const Error err = executorch::runtime::register_backend(*entries->back());
  if (err != Error::Ok) {
    return failed(err);
  }
  add_locked(backend);
  return Registration::kRegistered;
}

std::vector<DeviceBackend*> registered_device_backends() {
  std::lock_guard<std::mutex> lock(internal::registry_mutex());
  return table();
}

// Declared in program_check.h: the backends a load lets check_device_access allow on the device.
std::vector<std::string> device_backends(executorch::runtime::etensor::DeviceType type) {
  if (type == executorch::runtime::etensor::DeviceType::CPU) {
    return {};
  }
  const executorch::runtime::DeviceAllocator* server = executorch::runtime::get_device_allocator(type);
  if (server == nullptr) {
    return {};
  }
  std::vector<std::string> ids;
  for (const DeviceBackend* b : registered_device_backends()) {
    if (b->runs_on(*server)) {
      ids.emplace_back(b->id());
    }
  }
  // Upstream's CUDA backend is no DeviceBackend of ours, but its delegates run on a GPU: et-copy's CUDA
  // allocator or another library's (its own, registered when its library loads). Not on the simulated device.
  const bool gpu = type == executorch::runtime::etensor::DeviceType::CUDA && host_aliasing(server) == nullptr;
  if (gpu && std::find(ids.begin(), ids.end(), kCudaBackendId) == ids.end()) {
    ids.emplace_back(kCudaBackendId);
  }
  return ids;
}

Result<bool> runtime_flag(const executorch::runtime::BackendInitContext& context, const char* key) {
  auto flag = context.get_runtime_spec<bool>(key);
  if (flag.ok()) {
    return *flag;
  }
  if (flag.error() == Error::NotFound) {
    return false;
  }
  return Error::InvalidArgument;
}

namespace {

// The described backends, by id, under their own lock, in the order their
// libraries described them (none is there from the start). Leaked on
// purpose, as the table above.
struct Helps {
  std::mutex mutex;
  std::vector<DeviceBackendDefinition> helps;
};
Helps& helps() {
  static auto* h = new Helps();
  return *h;
}

// The description of `id`, or null; the caller holds h.mutex.
const DeviceBackendDefinition* find_locked(const Helps& h, const char* id) {
  for (const DeviceBackendDefinition& known : h.helps) {
    if (std::strcmp(known.backend->id(), id) == 0) {
      return &known;
    }
  }
  return nullptr;
}

std::optional<DeviceBackendDefinition> help_of(const std::string& id) {
  Helps& h = helps();
  std::lock_guard<std::mutex> lock(h.mutex);
  const DeviceBackendDefinition* known = find_locked(h, id.c_str());
  return known != nullptr ? std::optional<DeviceBackendDefinition>(*known) : std::nullopt;
}

} // namespace

Error describe_device_backend(const DeviceBackendDefinition& definition) {
  if (definition.backend == nullptr || definition.python == nullptr || definition.cpp == nullptr ||
      definition.runs_on == nullptr) {
    return Error::InvalidArgument;
  }
  const char* id = definition.backend->id();
  if (id == nullptr || id[0] == '\0') {
    return Error::InvalidArgument;
  }
  if (const Error e = register_payload_kind(definition.payload); e != Error::Ok) {
    return e;
  }
  Helps& h = helps();
  std::lock_guard<std::mutex> lock(h.mutex);
  if (find_locked(h, id) == nullptr) { // else the first description stays
    h.helps.push_back(definition);
  }
  return Error::Ok;
}

Registration register_device_backend(const DeviceBackendDefinition& definition, Error* error) {
  if (const Error e = describe_device_backend(definition); e != Error::Ok) {
    if (error != nullptr) {
      *error = e;
    }
    return Registration::kFailed;
  }
  return register_device_backend(*definition.backend, error);
}

std::string backend_hint(const std::string& id) {
  const executorch::runtime::DeviceAllocator* server =
      executorch::runtime::get_device_allocator(executorch::runtime::etensor::DeviceType::CUDA);
  if (server == nullptr) {
    return ""; // the refusal says nothing serves the device
  }
  const std::optional<DeviceBackendDefinition> help = help_of(id);
  if (!help) {
    return "";
  }
  if (!help->backend->runs_on(*server)) {
    return "backend '" + id + "' runs on " + help->runs_on + ", and cuda is served by " + allocator_words(server);
  }
  for (const DeviceBackend* b : registered_device_backends()) {
    if (id == b->id()) {
      return "";
    }
  }
  return "backend '" + id + "' is not registered: call " + help->python + " (C++: " + help->cpp + ") before loading";
}

} // namespace et_copy
