// Host memory for a method's outputs, which LoadedMethod::execute fills.
#pragma once

#include <cstdint>
#include <vector>

#include <et_copy/loaded_method.h>

/// One buffer per tensor output, at its upper-bound size (a non-tensor
/// output gets none), and the MethodOutput list that points into them.
struct HostOutputs {
  std::vector<std::vector<uint8_t>> memory;
  std::vector<et_copy::MethodOutput> outputs;

  explicit HostOutputs(const et_copy::LoadedMethod& method) {
    const auto& slots = method.io().outputs;
    memory.resize(slots.size());
    outputs.resize(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].tensor) {
        memory[i].resize(slots[i].nbytes);
        outputs[i].data = memory[i].data();
        outputs[i].nbytes = memory[i].size();
      }
    }
  }
};
