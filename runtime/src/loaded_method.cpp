#include <et_copy/loaded_method.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include <et_copy/log_capture.h>
#include <et_copy/program_check.h>
#include <et_copy/sessions.h>

#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

namespace et_copy {

using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Method;
using executorch::runtime::Result;
using executorch::runtime::Span;
namespace et = executorch::runtime::etensor;

namespace {

bool same_device(et::Device a, et::Device b) {
  return a.type() == b.type() && a.index() == b.index();
}

// The slot of `tensor`, as MethodMeta describes it (`info`) on the device
// ExecuTorch gave it; info's error when MethodMeta cannot (a tensor whose
// bytes overflow a size_t, which only Minimal verification lets load).
Result<IoSlot> tensor_slot(const EValue& tensor, const Result<executorch::runtime::TensorInfo>& info) {
  if (!info.ok()) {
    return info.error();
  }
  const auto* impl = tensor.toTensor().unsafeGetTensorImpl();
  IoSlot slot;
  slot.tensor = true;
  slot.planned = info->is_memory_planned();
  slot.dtype = info->scalar_type();
  slot.device = et::Device(impl->device_type(), impl->device_index());
  slot.nbytes = info->nbytes();
  slot.name = std::string(info->name());
  slot.sizes.assign(info->sizes().begin(), info->sizes().end());
  slot.dynamic = impl->shape_dynamism() != executorch::aten::TensorShapeDynamism::STATIC;
  slot.dim_order.assign(info->dim_order().begin(), info->dim_order().end());
  return slot;
}

// "input 0 is a tensor MethodMeta cannot describe (...)", for describe()'s refusal.
std::string undescribed(const char* what, size_t i, Error e) {
  return std::string(what) + " " + std::to_string(i) + " is a tensor MethodMeta cannot describe (" + error_name(e) +
         ": its byte size overflows, or its metadata is missing)";
}

} // namespace

Result<LoadedMethod*> Session::load(const std::string& name, executorch::runtime::EventTracer* profiler,
                                    FailureReport* report) {
  const std::string step = "loading method '" + name + "'";
  auto found = loaded_.find(name);
  if (found != loaded_.end()) {
    LoadedMethod* lm = found->second.get();
    if (lm->tracer_.inner() != profiler) {
      return fail(report, Error::InvalidArgument, "it is already loaded with another profiler, which it keeps", step);
    }
    if (!lm->described_) {
      if (const Error e = lm->describe(report); e != Error::Ok) { // it failed before
        return e;
      }
    }
    return lm;
  }
  std::unique_ptr<LoadedMethod> lm(new LoadedMethod(pool_, name, profiler));
  FailureReport failed;
  LogCapture capture;
  std::lock_guard<std::mutex> lock(pool_->execution_lock()); // loading may write the state
  auto m = method(name, &failed, &lm->tracer_);
  if (!m.ok()) {
    const Error e = fail(report, m.error(), std::move(failed.detail), step);
    if (report != nullptr) {
      report->log = capture.lines();
    }
    return e; // method() keeps no method it failed to load, so none holds the tracer
  }
  lm->method_ = *m;
  // From here the method holds lm's tracer: lm lives as long as the session.
  LoadedMethod* raw = loaded_.emplace(name, std::move(lm)).first->second.get();
  if (const Error e = raw->describe(report); e != Error::Ok) {
    return e;
  }
  return raw;
}

Error LoadedMethod::describe(FailureReport* report) {
  Method& m = *method_;
  const auto meta = m.method_meta();
  std::vector<EValue> values(std::max(m.inputs_size(), m.outputs_size()));
  const std::string step = "loading method '" + name_ + "'";
  // Deprecated, but the only way to read the device ExecuTorch gave each input.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  if (m.get_inputs(values.data(), values.size()) != Error::Ok) {
    return fail(report, Error::Internal, "could not read the method's inputs", step);
  }
#pragma GCC diagnostic pop
  io_.inputs.clear();
  for (size_t i = 0; i < m.inputs_size(); ++i) {
    // Tensor metadata only for tensors: ExecuTorch logs an error for any other.
    auto slot = values[i].isTensor() ? tensor_slot(values[i], meta.input_tensor_meta(i)) : Result<IoSlot>(IoSlot{});
    if (!slot.ok()) {
      return fail(report, Error::InvalidProgram, undescribed("input", i, slot.error()), step);
    }
    io_.inputs.push_back(std::move(*slot));
  }
  if (m.get_outputs(values.data(), values.size()) != Error::Ok) {
    return fail(report, Error::Internal, "could not read the method's outputs", step);
  }
  const Span<const uint8_t> bytes = pool_->program_bytes();
  std::vector<bool> filled;
  if (pool_->d2h_kernel_is_ours_) {
    filled = outputs_filled_by_d2h_copy(bytes.data(), bytes.size(), name_.c_str());
  }
  io_.outputs.clear();
  for (size_t i = 0; i < m.outputs_size(); ++i) {
    auto slot = values[i].isTensor() ? tensor_slot(values[i], meta.output_tensor_meta(i)) : Result<IoSlot>(IoSlot{});
    if (!slot.ok()) {
      return fail(report, Error::InvalidProgram, undescribed("output", i, slot.error()), step);
    }
    io_.outputs.push_back(std::move(*slot));
    io_.outputs.back().filled_by_d2h = io_.outputs.back().tensor && i < filled.size() && filled[i];
  }
  described_ = true;
  return Error::Ok;
}

Error LoadedMethod::check(Span<const EValue> inputs, Span<MethodOutput> outputs, FailureReport* report) const {
  const std::string step = "method '" + name_ + "'";
  if (inputs.size() != io_.inputs.size()) {
    return fail(report, Error::InvalidArgument,
                "takes " + std::to_string(io_.inputs.size()) + " inputs, got " + std::to_string(inputs.size()), step);
  }
  if (outputs.size() != io_.outputs.size()) {
    return fail(report, Error::InvalidArgument,
                "has " + std::to_string(io_.outputs.size()) + " outputs, got " + std::to_string(outputs.size()), step);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IoSlot& slot = io_.inputs[i];
    const std::string arg = "input " + std::to_string(i) + (slot.name.empty() ? "" : " (" + slot.name + ")");
    if (slot.tensor != inputs[i].isTensor()) {
      return fail(report, Error::InvalidArgument, arg + (slot.tensor ? " must be a tensor" : " is not a tensor"), step);
    }
    if (!slot.tensor) {
      continue;
    }
    const auto& t = inputs[i].toTensor();
    const et::Device device(t.unsafeGetTensorImpl()->device_type(), t.unsafeGetTensorImpl()->device_index());
    if (t.scalar_type() != slot.dtype || !same_device(device, slot.device)) {
      return fail(report, Error::InvalidArgument,
                  arg + " must be " + executorch::runtime::toString(slot.dtype) + " on " + device_name(slot.device) +
                      ", got " + executorch::runtime::toString(t.scalar_type()) + " on " + device_name(device),
                  step);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const IoSlot& slot = io_.outputs[i];
    const MethodOutput& o = outputs[i];
    const std::string arg = "output " + std::to_string(i);
    if (o.data == nullptr) {
      continue;
    }
    if (!slot.tensor) {
      return fail(report, Error::InvalidArgument, arg + " is not a tensor: give it no memory", step);
    }
    const et::Device host(et::DeviceType::CPU, 0);
    const et::Device want = slot.planned ? host : slot.device;
    if (!same_device(o.device, want) || o.nbytes < slot.nbytes) {
      return fail(report, Error::InvalidArgument,
                  arg + " needs " + std::to_string(slot.nbytes) + " bytes on " + device_name(want) + ", got " +
                      std::to_string(o.nbytes) + " on " + device_name(o.device),
                  step);
    }
  }
  return Error::Ok;
}

Error LoadedMethod::execute(Span<const EValue> inputs, Span<MethodOutput> outputs, FailureReport* report) {
  if (const Error e = check(inputs, outputs, report); e != Error::Ok) {
    return e;
  }
  Method& m = *method_;
  Error err = Error::Ok;
  std::string step;
  std::string instruction, op;
  LogCapture capture;
  std::lock_guard<std::mutex> lock(pool_->execution_lock()); // the scratch is shared
  for (size_t i = 0; i < inputs.size() && err == Error::Ok; ++i) {
    err = m.set_input(inputs[i], i);
    if (err != Error::Ok) {
      step = "setting input " + std::to_string(i);
    }
  }
  for (size_t i = 0; i < outputs.size() && err == Error::Ok; ++i) {
    if (outputs[i].data != nullptr && !io_.outputs[i].planned) {
      // Named before the call, which check() has made unable to fail (it refuses what it refuses); any
      // later failure names its own step.
      step = "binding output " + std::to_string(i);
      err = m.set_output_data_ptr(outputs[i].data, outputs[i].nbytes, i);
    }
  }
  // A host output the program plans and et-copy's d2h copy fills first:
  // pointed at the caller's memory for this execution, so the copy writes it
  // there and none follows (program_check.h says why that is safe).
  std::vector<void*> redirected(outputs.size(), nullptr);
  for (size_t i = 0; i < outputs.size() && err == Error::Ok; ++i) {
    if (outputs[i].data != nullptr && io_.outputs[i].planned && io_.outputs[i].filled_by_d2h) {
      auto* impl = m.get_output(i).toTensor().unsafeGetTensorImpl();
      redirected[i] = impl->mutable_data();
      impl->set_data(outputs[i].data);
    }
  }
  std::string detail;
  bool debug_buffer_full = false;
  if (err == Error::Ok) {
    err = m.execute();
    std::optional<InstructionLocation> failed_at = tracer_.last_instruction();
    if (const auto short_of = tracer_.shortfall(); err == Error::Ok && short_of) {
      // The run went on without logging it: an ETDumpGen aborts the process
      // on a tensor its debug buffer cannot take.
      err = Error::OutOfResources;
      debug_buffer_full = true;
      failed_at = short_of->instruction;
      detail = std::string(short_of->instruction ? "logging an instruction's values" : "logging the method's outputs") +
               ": the ETDump debug buffer of " + std::to_string(short_of->size) +
               " bytes is full: logging this run's tensors would take " + std::to_string(short_of->needed) +
               " bytes, and those that did not fit were not logged";
    }
    if (err != Error::Ok) {
      step = "executing"; // execute() has reset itself for the next call
      if (const auto loc = failed_at) {
        const Span<const uint8_t> bytes = pool_->program_bytes();
        instruction = std::to_string(loc->chain) + ":" + std::to_string(loc->instruction);
        op = instruction_operator(bytes.data(), bytes.size(), name_.c_str(), loc->chain, loc->instruction);
      }
    }
  }
  for (size_t i = 0; i < outputs.size() && err == Error::Ok; ++i) {
    if (outputs[i].data == nullptr || !io_.outputs[i].planned) {
      continue;
    }
    // Memory the method owns: copy out, unless the redirect wrote it in place.
    const auto& t = m.get_output(i).toTensor();
    if (t.const_data_ptr() == outputs[i].data) {
      continue;
    }
    if (t.nbytes() > outputs[i].nbytes) {
      err = Error::InvalidArgument;
      step = "copying output " + std::to_string(i) + " (" + std::to_string(t.nbytes()) + " bytes) into a " +
             std::to_string(outputs[i].nbytes) + "-byte tensor";
    } else if (t.nbytes() > 0 && io_.outputs[i].device.type() == et::DeviceType::CPU) {
      std::memcpy(outputs[i].data, t.const_data_ptr(), t.nbytes());
    } else if (t.nbytes() > 0) {
      auto* allocator = executorch::runtime::get_device_allocator(io_.outputs[i].device.type());
      err = allocator == nullptr ? Error::NotFound
                                 : allocator->copy_device_to_host(outputs[i].data, t.const_data_ptr(), t.nbytes(),
                                                                  io_.outputs[i].device.index());
      if (err != Error::Ok) {
        step = "copying output " + std::to_string(i) + " from " + device_name(io_.outputs[i].device);
      }
    }
  }
  for (size_t i = 0; i < redirected.size(); ++i) {
    if (redirected[i] != nullptr) { // the method's own memory again, for whoever runs it next
      m.get_output(i).toTensor().unsafeGetTensorImpl()->set_data(redirected[i]);
    }
  }
  if (err != Error::Ok) {
    err = fail(report, err, detail, step);
    if (report != nullptr) {
      report->instruction = std::move(instruction);
      report->op = std::move(op);
      report->log = capture.lines();
      report->debug_buffer_full = debug_buffer_full;
    }
    return err;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const EValue& v = m.get_output(i);
    if (io_.outputs[i].tensor) {
      const auto sizes = v.toTensor().sizes();
      outputs[i].rank = sizes.size();
      std::copy(sizes.begin(), sizes.end(), outputs[i].sizes);
    } else {
      outputs[i].value = v;
    }
  }
  return Error::Ok;
}

} // namespace et_copy
