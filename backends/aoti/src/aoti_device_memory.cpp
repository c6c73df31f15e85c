#include "aoti_device_memory.h"

#include <mutex>

#include <et_copy/simulated_device_allocator.h>
#include <executorch/runtime/core/device_allocator.h>

namespace et_copy::aoti {

using executorch::runtime::Error;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::NamedDataMap;
using executorch::runtime::Result;
namespace et = executorch::runtime::etensor;

namespace {

executorch::runtime::DeviceAllocator* cuda_allocator() {
  return executorch::runtime::get_device_allocator(et::DeviceType::CUDA);
}

// The caches, leaked on purpose: handles may be destroyed during static destruction.
struct Caches {
  std::mutex mutex;
  std::map<std::pair<std::string, int>, std::weak_ptr<DeviceBlock>> weights;
  std::map<ArenaKey, std::weak_ptr<StateArena>> arenas;
};
Caches& caches() {
  static Caches* c = new Caches();
  return *c;
}

Error write_start(StateArena& a) {
  std::vector<uint8_t> zeros(a.block->nbytes(), 0);
  Error e = a.block->write(0, zeros.data(), zeros.size());
  for (const auto& [name, s] : a.states) {
    if (e == Error::Ok && !s.initial.empty()) {
      e = a.block->write(s.offset, s.initial.data(), s.initial.size());
    }
  }
  return e;
}

} // namespace

Result<std::unique_ptr<DeviceBlock>> DeviceBlock::create(size_t nbytes, et::DeviceIndex index) {
  if (nbytes == 0) {
    return std::unique_ptr<DeviceBlock>(new DeviceBlock(nullptr, nullptr, 0, index));
  }
  auto* alloc = cuda_allocator();
  if (alloc == nullptr) {
    return Error::NotFound;
  }
  auto p = alloc->allocate(nbytes, index);
  if (!p.ok()) {
    return p.error();
  }
  uint8_t* alias = nullptr;
  SimulatedDeviceAllocator& sim = simulated_device_allocator();
  if (alloc == &sim) {
    auto a = sim.host_alias(*p, nbytes, index);
    if (!a.ok()) {
      alloc->deallocate(*p, index);
      return a.error();
    }
    alias = static_cast<uint8_t*>(*a);
  }
  return std::unique_ptr<DeviceBlock>(new DeviceBlock(*p, alias, nbytes, index));
}

DeviceBlock::~DeviceBlock() {
  // The allocator that made it: ExecuTorch's registry never replaces one.
  if (device_ != nullptr) {
    cuda_allocator()->deallocate(device_, index_);
  }
}

Error DeviceBlock::write(size_t offset, const void* src, size_t nbytes) {
  if (nbytes == 0) {
    return Error::Ok;
  }
  return cuda_allocator()->copy_host_to_device(device() + offset, src, nbytes, index_);
}

Result<std::shared_ptr<DeviceBlock>> device_weight(const DelegateWeight& w, et::DeviceIndex index,
                                                   const NamedDataMap* named_data, std::string* what) {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mutex); // one upload per key, even with concurrent inits
  for (auto it = c.weights.begin(); it != c.weights.end();) {
    it = it->second.expired() ? c.weights.erase(it) : std::next(it);
  }
  const auto key = std::make_pair(w.key, static_cast<int>(index));
  std::shared_ptr<DeviceBlock> block = c.weights[key].lock();
  if (block != nullptr) {
    if (block->nbytes() != w.nbytes) {
      *what = "weight '" + w.fqn + "': content key '" + w.key + "' names " + std::to_string(w.nbytes) +
              " bytes here and " + std::to_string(block->nbytes()) + " bytes in a weight already uploaded";
      return Error::DelegateInvalidCompatibility;
    }
    return block;
  }
  if (named_data == nullptr) {
    *what = "weight '" + w.fqn + "': the program has no named data to read '" + w.key + "' from";
    return Error::NotFound;
  }
  auto host = named_data->get_data(w.key);
  if (!host.ok()) {
    *what = "weight '" + w.fqn + "': the program's named data has no '" + w.key + "'";
    return host.error();
  }
  if (host->size() != w.nbytes) {
    *what = "weight '" + w.fqn + "': named data '" + w.key + "' has " + std::to_string(host->size()) +
            " bytes, the record says " + std::to_string(w.nbytes);
    return Error::DelegateInvalidCompatibility;
  }
  auto made = DeviceBlock::create(w.nbytes, index);
  if (!made.ok()) {
    *what = "weight '" + w.fqn + "': cannot allocate " + std::to_string(w.nbytes) +
            " bytes on cuda:" + std::to_string(int(index));
    return made.error();
  }
  block = std::move(*made);
  const Error e = block->write(0, host->data(), w.nbytes);
  host->Free();
  if (e != Error::Ok) {
    *what = "weight '" + w.fqn + "': the host-to-device copy failed";
    return e;
  }
  c.weights[key] = block;
  return block;
}

Result<std::shared_ptr<StateArena>> state_arena(const ArenaKey& key, const DelegateRecord& r, const std::string& method,
                                                const NamedDataMap* named_data, std::string* what) {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto it = c.arenas.begin(); it != c.arenas.end();) {
    it = it->second.expired() ? c.arenas.erase(it) : std::next(it);
  }
  std::shared_ptr<StateArena> arena = c.arenas[key].lock();
  if (arena != nullptr && arena->block->nbytes() != r.arena_nbytes) {
    *what = "method '" + method + "' plans its state as " + std::to_string(r.arena_nbytes) + " bytes, method '" +
            arena->method + "' of the same session as " + std::to_string(arena->block->nbytes()) +
            " bytes: methods of one program must agree";
    return Error::InvalidProgram;
  }
  const bool fresh = arena == nullptr;
  if (fresh) {
    auto block = DeviceBlock::create(r.arena_nbytes, r.device_index);
    if (!block.ok()) {
      *what = "cannot allocate the state arena (" + std::to_string(r.arena_nbytes) +
              " bytes) on cuda:" + std::to_string(int(r.device_index));
      return block.error();
    }
    arena = std::make_shared<StateArena>();
    arena->block = std::move(*block);
    arena->method = method;
  }
  std::vector<std::string> added;
  for (const auto& s : r.states) {
    auto known = arena->states.find(s.name);
    if (known != arena->states.end()) {
      if (known->second.offset != s.offset || known->second.nbytes != s.nbytes) {
        *what = "state '" + s.name + "' is " + std::to_string(s.nbytes) + " bytes at " + std::to_string(s.offset) +
                " here, " + std::to_string(known->second.nbytes) + " bytes at " + std::to_string(known->second.offset) +
                " in method '" + arena->method + "'";
        return Error::InvalidProgram;
      }
      continue;
    }
    StateArena::State state{s.offset, s.nbytes, {}};
    if (!s.initial_key.empty()) {
      auto blob = named_data == nullptr ? Result<FreeableBuffer>(Error::NotFound) : named_data->get_data(s.initial_key);
      if (!blob.ok() || blob->size() != s.nbytes) {
        *what = "state '" + s.name + "': the initial value '" + s.initial_key + "' is " +
                (blob.ok() ? std::to_string(blob->size()) + " bytes, not " + std::to_string(s.nbytes)
                           : std::string("not in the program's named data"));
        return blob.ok() ? Error::DelegateInvalidCompatibility : blob.error();
      }
      const auto* p = static_cast<const uint8_t*>(blob->data());
      state.initial.assign(p, p + s.nbytes);
    }
    added.push_back(s.name);
    arena->states.emplace(s.name, std::move(state));
  }
  Error e = Error::Ok;
  if (fresh) {
    e = write_start(*arena);
  } else {
    // An arena in use: write only the states it did not know, leave the rest as they are.
    for (const std::string& name : added) {
      const auto& st = arena->states.at(name);
      if (e == Error::Ok && !st.initial.empty()) {
        e = arena->block->write(st.offset, st.initial.data(), st.initial.size());
      }
    }
  }
  if (e != Error::Ok) {
    *what = "writing the start state failed";
    return e;
  }
  c.arenas[key] = arena;
  return arena;
}

} // namespace et_copy::aoti
