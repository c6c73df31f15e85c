#include <et_copy/device_residency.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

#include <et_copy/failure_report.h>
#include <et_copy/sha256.h>
#include <et_copy/counting_device_allocator.h>

namespace et_copy {

using executorch::runtime::DeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::NamedDataMap;
using executorch::runtime::Result;
namespace et = executorch::runtime::etensor;

namespace {

// Arena map key: (owner, 0, session id) or (owner, 1, named data map address).
using ArenaMapKey = std::tuple<std::string, int, uintptr_t>;

ArenaMapKey map_key(const ArenaKey& key) {
  if (key.session.has_value()) {
    return {key.owner, 0, static_cast<uintptr_t>(static_cast<uint32_t>(*key.session))};
  }
  return {key.owner, 1, reinterpret_cast<uintptr_t>(key.data)};
}

// A weight on a device, and whether its bytes were checked against its key.
struct CachedWeight {
  std::weak_ptr<DeviceBlock> block;
  bool verified = false;
  bool expired() const {
    return block.expired();
  }
};

// Verified uploads go in pieces this large: each piece is hashed, then
// copied while it is still in the cache.
constexpr size_t kVerifyChunk = size_t{1} << 20;

// The process-wide caches, all under one lock. Leaked on purpose: blocks
// may be freed during static destruction.
struct Caches {
  std::mutex mutex;
  std::map<std::tuple<std::string, int, int>, CachedWeight> weights; // (key, type, index)
  std::map<int, std::set<std::shared_ptr<DeviceBlock>>> pins;        // open pools
  std::map<ArenaMapKey, std::weak_ptr<StateArena>> arenas;
};
Caches& caches() {
  static Caches* c = new Caches();
  return *c;
}

template <typename Map>
void drop_expired(Map& m) {
  for (auto it = m.begin(); it != m.end();) {
    it = it->second.expired() ? m.erase(it) : std::next(it);
  }
}

} // namespace

Result<std::unique_ptr<DeviceBlock>> DeviceBlock::create(et::DeviceType type, et::DeviceIndex index, size_t nbytes) {
  if (type == et::DeviceType::CPU) {
    return Error::NotSupported; // host memory is not a device block
  }
  DeviceAllocator* allocator = executorch::runtime::get_device_allocator(type);
  if (allocator == nullptr) {
    return Error::NotFound;
  }
  if (nbytes == 0) {
    // An empty planned buffer (everything bound in place): no device memory to take.
    return std::unique_ptr<DeviceBlock>(new DeviceBlock(allocator, nullptr, nullptr, 0, type, index));
  }
  auto p = allocator->allocate(nbytes, index);
  if (!p.ok()) {
    return p.error();
  }
  uint8_t* alias = nullptr;
  if (const HostAliasing* aliasing = host_aliasing(allocator); aliasing != nullptr) {
    auto a = aliasing->host_alias(*p, nbytes, index);
    if (!a.ok()) {
      allocator->deallocate(*p, index);
      return a.error();
    }
    alias = static_cast<uint8_t*>(*a);
  }
  return std::unique_ptr<DeviceBlock>(new DeviceBlock(allocator, *p, alias, nbytes, type, index));
}

DeviceBlock::~DeviceBlock() {
  if (device_ != nullptr) {
    allocator_->deallocate(device_, index_);
  }
}

Error DeviceBlock::write(size_t offset, const void* src, size_t nbytes) {
  if (offset > nbytes_ || nbytes > nbytes_ - offset) {
    return Error::InvalidArgument;
  }
  if (nbytes == 0) {
    return Error::Ok;
  }
  return allocator_->copy_host_to_device(static_cast<uint8_t*>(device_) + offset, src, nbytes, index_);
}

bool content_key_matches(const std::string& key, const std::string& digest) {
  const size_t colon = key.rfind(':');
  const std::string named = colon == std::string::npos ? key : key.substr(colon + 1);
  return named.size() >= 32 && is_lower_hex(named, named.size()) && digest.compare(0, named.size(), named) == 0;
}

namespace {

// Copies `nbytes` at `src` into `block`, hashing them in the same pass when
// `digest` is not null.
Error upload(DeviceBlock& block, const uint8_t* src, size_t nbytes, std::string* digest) {
  if (digest == nullptr) {
    return block.write(0, src, nbytes);
  }
  Sha256 hash;
  for (size_t at = 0; at < nbytes; at += kVerifyChunk) {
    const size_t n = std::min(kVerifyChunk, nbytes - at);
    hash.update(src + at, n);
    const Error e = block.write(at, src + at, n);
    if (e != Error::Ok) {
      return e;
    }
  }
  *digest = Sha256::hex(hash.finish());
  return Error::Ok;
}

} // namespace

Result<std::shared_ptr<DeviceBlock>> acquire_weight(const std::string& key, et::DeviceType type, et::DeviceIndex index,
                                                    size_t nbytes, const NamedDataMap* source, std::optional<int> pool,
                                                    FailureReport* report, bool verify) {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mutex); // one upload per key, even with concurrent loads
  const auto cache_key = std::make_tuple(key, static_cast<int>(type), static_cast<int>(index));
  CachedWeight& cached = c.weights[cache_key];
  std::shared_ptr<DeviceBlock> block = cached.block.lock();
  if (block != nullptr && block->nbytes() != nbytes) {
    return fail(report, Error::DelegateInvalidCompatibility,
                "content key '" + key + "' names " + std::to_string(nbytes) + " bytes here and " +
                    std::to_string(block->nbytes()) + " bytes in a weight already uploaded");
  }
  if (block == nullptr || (verify && !cached.verified)) {
    if (source == nullptr) {
      return fail(report, Error::NotFound, "the program has no named data to read '" + key + "' from");
    }
    auto host = source->get_data(key);
    if (!host.ok()) {
      // The likely cause: a program exported with its weights in a .ptd, loaded without that file.
      return fail(report, host.error(),
                  "the program's named data has no '" + key +
                      "' (a program whose weights are in a .ptd file needs that file at load: data_path)");
    }
    if (host->size() != nbytes) {
      return fail(report, Error::DelegateInvalidCompatibility,
                  "named data '" + key + "' has " + std::to_string(host->size()) + " bytes, the record says " +
                      std::to_string(nbytes));
    }
    auto made = DeviceBlock::create(type, index, nbytes);
    if (!made.ok()) {
      return fail(report, made.error(),
                  "cannot allocate " + std::to_string(nbytes) + " bytes on " + device_name(type, index));
    }
    std::shared_ptr<DeviceBlock> fresh = std::move(*made);
    std::string digest;
    const Error e = upload(*fresh, static_cast<const uint8_t*>(host->data()), nbytes, verify ? &digest : nullptr);
    host->Free();
    if (e != Error::Ok) {
      return fail(report, e, "the host-to-device copy failed");
    }
    if (verify && !content_key_matches(key, digest)) {
      return fail(
          report, Error::InvalidProgram,
          "named data '" + key + "' hashes to " + digest.substr(0, 32) + ", not its key: the data is corrupted");
    }
    block = std::move(fresh);
    cached = CachedWeight{block, verify};
  }
  if (pool.has_value()) {
    auto pins = c.pins.find(*pool);
    if (pins != c.pins.end()) {
      pins->second.insert(block);
    }
  }
  drop_expired(c.weights);
  return block;
}

void open_pool(int pool) {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.pins[pool]; // an empty pin set: the pool is open
}

void release_pool(int pool) {
  std::set<std::shared_ptr<DeviceBlock>> dropped; // freed after the lock is let go
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.pins.find(pool);
  if (it != c.pins.end()) {
    dropped = std::move(it->second);
    c.pins.erase(it);
  }
}

size_t pinned_nbytes(int pool) {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.pins.find(pool);
  size_t n = 0;
  for (const auto& b : it == c.pins.end() ? std::set<std::shared_ptr<DeviceBlock>>{} : it->second) {
    n += b->nbytes();
  }
  return n;
}

// StateArena's privates, for the functions below.
struct ResidencyAccess {
  static Error write_start(StateArena& a) {
    std::vector<uint8_t> zeros(a.block_->nbytes(), 0);
    Error e = a.block_->write(0, zeros.data(), zeros.size());
    for (const auto& [name, initial] : a.initial_) {
      if (e == Error::Ok && !initial.empty()) {
        e = a.block_->write(a.states_.at(name).offset, initial.data(), initial.size());
      }
    }
    return e;
  }

  static Result<std::shared_ptr<StateArena>> acquire(const ArenaKey& key, et::DeviceType type, et::DeviceIndex index,
                                                     size_t nbytes, const std::vector<ArenaState>& states,
                                                     const NamedDataMap* source, const std::string& method,
                                                     FailureReport* report, bool verify) {
    Caches& c = caches();
    std::lock_guard<std::mutex> lock(c.mutex);
    const ArenaMapKey mk = map_key(key);
    std::shared_ptr<StateArena> arena = c.arenas[mk].lock();
    if (arena != nullptr && arena->block_->nbytes() != nbytes) {
      return fail(report, Error::InvalidProgram,
                  "method '" + method + "' plans its state as " + std::to_string(nbytes) + " bytes, method '" +
                      arena->method_ + "' of the same session as " + std::to_string(arena->block_->nbytes()) +
                      " bytes: methods of one program must agree");
    }
    const bool fresh = arena == nullptr;
    if (fresh) {
      auto block = DeviceBlock::create(type, index, nbytes);
      if (!block.ok()) {
        return fail(
            report, block.error(),
            "cannot allocate the state arena (" + std::to_string(nbytes) + " bytes) on " + device_name(type, index));
      }
      arena = std::make_shared<StateArena>();
      arena->block_ = std::move(*block);
      arena->method_ = method;
    }
    // Check every state before adding any: a refused load leaves the arena as it was.
    std::vector<std::pair<const ArenaState*, std::vector<uint8_t>>> added;
    for (const auto& s : states) {
      auto known = arena->states_.find(s.name);
      if (known != arena->states_.end()) {
        if (known->second.offset != s.offset || known->second.nbytes != s.nbytes) {
          return fail(report, Error::InvalidProgram,
                      "state '" + s.name + "' is " + std::to_string(s.nbytes) + " bytes at " +
                          std::to_string(s.offset) + " here, " + std::to_string(known->second.nbytes) + " bytes at " +
                          std::to_string(known->second.offset) + " in method '" + arena->method_ + "'");
        }
        continue;
      }
      if (s.offset > nbytes || s.nbytes > nbytes - s.offset) {
        return fail(report, Error::InvalidProgram,
                    "state '" + s.name + "' (" + std::to_string(s.nbytes) + " bytes at " + std::to_string(s.offset) +
                        ") leaves the arena of " + std::to_string(nbytes) + " bytes");
      }
      std::vector<uint8_t> initial;
      if (!s.initial_key.empty()) {
        auto blob = source == nullptr ? Result<FreeableBuffer>(Error::NotFound) : source->get_data(s.initial_key);
        if (!blob.ok() || blob->size() != s.nbytes) {
          return fail(report, blob.ok() ? Error::DelegateInvalidCompatibility : blob.error(),
                      "state '" + s.name + "': the initial value '" + s.initial_key + "' is " +
                          (blob.ok() ? std::to_string(blob->size()) + " bytes, not " + std::to_string(s.nbytes)
                                     : std::string("not in the program's named data")));
        }
        const auto* p = static_cast<const uint8_t*>(blob->data());
        if (verify && !content_key_matches(s.initial_key, Sha256::hex(Sha256::of(p, s.nbytes)))) {
          return fail(report, Error::InvalidProgram,
                      "state '" + s.name + "': the initial value '" + s.initial_key +
                          "' hashes to another key: the data is corrupted");
        }
        initial.assign(p, p + s.nbytes);
      }
      added.emplace_back(&s, std::move(initial));
    }
    for (auto& [s, initial] : added) {
      arena->states_.emplace(s->name, *s);
      arena->initial_.emplace(s->name, std::move(initial));
    }
    Error e = Error::Ok;
    if (fresh) {
      e = write_start(*arena);
    } else {
      // An arena in use: write only the states it did not know, leave the rest as they are.
      for (const auto& [s, unused] : added) {
        const auto& initial = arena->initial_.at(s->name);
        if (e == Error::Ok && !initial.empty()) {
          e = arena->block_->write(s->offset, initial.data(), initial.size());
        }
      }
    }
    if (e != Error::Ok) {
      return fail(report, e, "writing the start state failed");
    }
    c.arenas[mk] = arena;
    drop_expired(c.arenas);
    return arena;
  }
};

Result<std::shared_ptr<StateArena>> acquire_arena(const ArenaKey& key, et::DeviceType type, et::DeviceIndex index,
                                                  size_t nbytes, const std::vector<ArenaState>& states,
                                                  const NamedDataMap* source, const std::string& method,
                                                  FailureReport* report, bool verify) {
  return ResidencyAccess::acquire(key, type, index, nbytes, states, source, method, report, verify);
}

namespace {

std::shared_ptr<StateArena> find_arena(Caches& c, const std::string& owner, int session) {
  auto it = c.arenas.find(map_key(ArenaKey{owner, session, nullptr}));
  return it == c.arenas.end() ? nullptr : it->second.lock();
}

} // namespace

Error reset_arena(const std::string& owner, int session) {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::shared_ptr<StateArena> arena = find_arena(c, owner, session);
  if (arena == nullptr) {
    return Error::NotFound;
  }
  return ResidencyAccess::write_start(*arena);
}

size_t arena_nbytes(const std::string& owner, int session) {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::shared_ptr<StateArena> arena = find_arena(c, owner, session);
  return arena == nullptr ? 0 : arena->block().nbytes();
}

} // namespace et_copy
