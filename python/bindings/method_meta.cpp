// Method metadata as Python dicts, from ExecuTorch's MethodMeta and the
// devices et-copy's core reads from the program (method_io_devices).
#include "method_meta.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <et_copy/program_check.h>
#include <executorch/runtime/executor/method_meta.h>

#include "failure.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;
using executorch::runtime::MethodMeta;
using executorch::runtime::Tag;
namespace et = executorch::runtime::etensor;

// A tensor's metadata as the program declares it, and the device it lives on.
py::dict tensor_info_dict(const executorch::runtime::TensorInfo& info, et::Device device) {
  py::dict d;
  d["name"] = std::string(info.name());
  d["dtype"] = static_cast<int>(info.scalar_type());
  d["shape"] = std::vector<int64_t>(info.sizes().begin(), info.sizes().end());
  d["dim_order"] = std::vector<int64_t>(info.dim_order().begin(), info.dim_order().end());
  d["nbytes"] = info.nbytes();
  d["memory_planned"] = info.is_memory_planned();
  d["device_type"] = static_cast<int>(device.type());
  d["device_index"] = static_cast<int>(device.index());
  return d;
}

// A MethodMeta read that fails only for an index past its count, which the
// caller's loop never asks: a failure is a bug to report, not a value to make up.
template <typename T>
T read_in_range(executorch::runtime::Result<T> r, const std::string& what) {
  if (!r.ok()) {
    throw Failure(r.error(), "cannot read " + what);
  }
  return *r;
}

// Each planned buffer of a method: its size and the device the program names.
py::list planned_buffers(const MethodMeta& meta) {
  py::list buffers;
  for (size_t i = 0; i < meta.num_memory_planned_buffers(); ++i) {
    const std::string what = "planned buffer " + std::to_string(i);
    const auto device = read_in_range(meta.memory_planned_buffer_device(i), what);
    py::dict b;
    b["device_type"] = static_cast<int>(device.type());
    b["device_index"] = static_cast<int>(device.index());
    b["nbytes"] = read_in_range(meta.memory_planned_buffer_size(i), what);
    buffers.append(b);
  }
  return buffers;
}

// The one Python form of a method's metadata (_C.pyi's MethodMeta), from
// ExecuTorch's MethodMeta: per input and output its TensorInfo with the
// device the tensor lives on (`devices`), {"tag": code} for any other value,
// None for a tensor whose TensorInfo is unreadable; each attribute's
// TensorInfo and device; the planned buffers with their devices.
py::dict method_meta_dict(const MethodMeta& meta, const et_copy::MethodIoDevices& devices) {
  auto device_of = [](const std::vector<et::Device>& list, size_t i) {
    return i < list.size() ? list[i] : et::Device(et::DeviceType::CPU, 0);
  };
  auto entries = [&](size_t n, auto tag_of, auto info_of, const std::vector<et::Device>& where) {
    py::list list;
    for (size_t i = 0; i < n; ++i) {
      const auto tag = tag_of(i);
      if (tag.ok() && *tag == Tag::Tensor) {
        auto t = info_of(i);
        list.append(t.ok() ? py::object(tensor_info_dict(*t, device_of(where, i))) : py::object(py::none()));
      } else {
        py::dict e;
        e["tag"] = tag.ok() ? static_cast<int>(*tag) : -1;
        list.append(e);
      }
    }
    return list;
  };
  py::dict d;
  const char* name = meta.name();
  d["name"] =
      py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(name, static_cast<Py_ssize_t>(std::strlen(name)), "replace"));
  d["inputs"] = entries(
      meta.num_inputs(), [&](size_t i) { return meta.input_tag(i); },
      [&](size_t i) { return meta.input_tensor_meta(i); }, devices.inputs);
  d["outputs"] = entries(
      meta.num_outputs(), [&](size_t i) { return meta.output_tag(i); },
      [&](size_t i) { return meta.output_tensor_meta(i); }, devices.outputs);
  py::list attributes;
  for (size_t i = 0; i < meta.num_attributes(); ++i) {
    auto t = meta.attribute_tensor_meta(i);
    if (t.ok()) {
      attributes.append(tensor_info_dict(*t, device_of(devices.attributes, i)));
    }
  }
  d["attributes"] = attributes;
  d["planned_buffers"] = planned_buffers(meta);
  return d;
}

} // namespace

// A method's metadata read from the program alone (nothing loaded), each
// tensor on the device the program places it on.
py::dict program_method_meta(PyProgram& lp, const std::string& name) {
  auto meta = lp.program().method_meta(name.c_str());
  if (!meta.ok()) {
    throw Failure(Error::InvalidArgument, "et_copy.runtime: the program has no method '" + name +
                                              "' (it has: " + py::str(method_names(lp)).cast<std::string>() + ")");
  }
  const auto bytes = lp.core->bytes();
  return method_meta_dict(*meta, et_copy::method_io_devices(bytes.data(), bytes.size(), name.c_str()));
}

// The loaded method's metadata: its inputs and outputs on the devices its
// slots hold them on, its attributes where the program places them.
py::dict method_meta(const PyMethod& lm) {
  const auto bytes = lm.session->program->core->bytes();
  et_copy::MethodIoDevices devices = et_copy::method_io_devices(bytes.data(), bytes.size(), lm.name.c_str());
  auto slot_devices = [](const std::vector<IoSlot>& slots) {
    std::vector<et::Device> list;
    for (const IoSlot& slot : slots) {
      list.push_back(slot.device); // CPU's for a value that is not a tensor
    }
    return list;
  };
  devices.inputs = slot_devices(lm.io.inputs);
  devices.outputs = slot_devices(lm.io.outputs);
  return method_meta_dict(lm.core->method().method_meta(), devices);
}

} // namespace et_copy::bindings
