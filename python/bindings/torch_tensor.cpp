// Reads torch tensors through at::Tensor: no Python attribute lookups, no
// Python objects made, which is what lets a 4 KiB et_copy.h2d_copy cost
// less than torch's own copy_ (python -m et_copy bench).
#include "torch_tensor.h"

#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Size.h>
#include <torch/csrc/autograd/python_variable.h>

namespace et_copy::bindings {

namespace {

// ExecuTorch's ScalarType code for each torch ScalarType et-copy moves: the
// two enums agree on 0..29 (tests/python/test_tensor_boundary.py pins it against
// executorch's own table). Not moved: QUInt4x2 and QUInt2x4, which torch
// packs two or four to a byte while ExecuTorch counts a byte per element,
// so a copy would read past torch's memory; and torch's newer types
// (UInt1..7, Int1..7, Float8_e8m0fnu, Float4_e2m1fn_x2), which ExecuTorch
// 1.5.1 has no code for.
int code_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::QUInt4x2:
    case c10::ScalarType::QUInt2x4:
      return -1;
    default: {
      const int code = static_cast<int>(t);
      return code >= 0 && code <= static_cast<int>(c10::ScalarType::UInt64) ? code : -1;
    }
  }
}

// str(o), or "?" when str() fails (its error cleared).
std::string str_of(PyObject* o) {
  PyObject* s = PyObject_Str(o);
  const char* utf8 = s != nullptr ? PyUnicode_AsUTF8(s) : nullptr;
  std::string out = utf8 != nullptr ? utf8 : "?";
  Py_XDECREF(s);
  if (utf8 == nullptr) {
    PyErr_Clear();
  }
  return out;
}

} // namespace

TorchRead read_torch_tensor(PyObject* o, TensorSpec& s) {
  if (!THPVariable_Check(o)) {
    return TorchRead::kNotATensor;
  }
  const at::Tensor& t = THPVariable_Unpack(o);
  const c10::Device device = t.device();
  if (device.is_cpu()) {
    s.device_type = 0;
    s.device_index = 0;
  } else if (device.is_cuda()) {
    s.device_type = 1;
    s.device_index = device.index();
  } else {
    return TorchRead::kDevice;
  }
  if (t.layout() != c10::kStrided || t.is_nested()) {
    return TorchRead::kLayout;
  }
  s.dtype = code_of(t.scalar_type());
  if (s.dtype < 0) {
    return TorchRead::kDtype;
  }
  const auto sizes = t.sizes();
  if (sizes.size() > kMaxTensorDims) {
    s.rank = sizes.size();
    return TorchRead::kTooManyDims;
  }
  const auto strides = t.strides();
  s.rank = sizes.size();
  for (size_t i = 0; i < s.rank; ++i) {
    s.sizes[i] = sizes[i];
    s.strides[i] = strides[i];
  }
  dim_order_from_strides(s);
  // A tensor without storage (a batched tensor inside torch.func.vmap) has
  // no memory to copy, and data_ptr() throws: refused, unless it has no
  // elements to read.
  if (!t.has_storage()) {
    if (t.numel() != 0) {
      return TorchRead::kNoStorage;
    }
    s.data = 0;
    return TorchRead::kOk;
  }
  s.data = reinterpret_cast<uintptr_t>(t.data_ptr());
  return TorchRead::kOk;
}

int torch_dtype_code(PyObject* dtype) {
  if (!THPDtype_Check(dtype)) {
    return -2;
  }
  return code_of(reinterpret_cast<THPDtype*>(dtype)->scalar_type);
}

PyObject* torch_dtype_for_code(int code) {
  if (code < 0 || code > static_cast<int>(c10::ScalarType::UInt64)) {
    return nullptr;
  }
  const auto t = static_cast<c10::ScalarType>(code);
  return code_of(t) == code ? reinterpret_cast<PyObject*>(torch::getTHPDtype(t)) : nullptr;
}

const int* movable_codes() {
  static const auto codes = [] {
    struct List {
      int v[32];
    } l{};
    int n = 0;
    for (int c = 0; c <= static_cast<int>(c10::ScalarType::UInt64); ++c) {
      if (code_of(static_cast<c10::ScalarType>(c)) == c) {
        l.v[n++] = c;
      }
    }
    l.v[n] = -1;
    return l;
  }();
  return codes.v;
}

size_t torch_itemsize(int code) {
  return c10::elementSize(static_cast<c10::ScalarType>(code));
}

PyObject* torch_size(const int64_t* sizes, size_t rank) {
  // As THPSize_NewFromSizes does (libtorch_python exports the type, not it).
  PyObject* size = THPSizeType.tp_alloc(&THPSizeType, static_cast<Py_ssize_t>(rank));
  for (size_t i = 0; size != nullptr && i < rank; ++i) {
    PyObject* v = PyLong_FromLongLong(sizes[i]);
    if (v == nullptr) {
      Py_CLEAR(size);
      break;
    }
    PyTuple_SET_ITEM(size, static_cast<Py_ssize_t>(i), v);
  }
  return size;
}

std::string unsupported_dtype_message(const char* op, const char* arg, PyObject* dtype) {
  static const std::string supported = [] {
    std::string names;
    for (const int* c = movable_codes(); *c >= 0; ++c) {
      std::string name = str_of(torch_dtype_for_code(*c));
      constexpr char kPrefix[] = "torch.";
      if (name.rfind(kPrefix, 0) == 0) {
        name.erase(0, sizeof(kPrefix) - 1);
      }
      names += (names.empty() ? "" : ", ") + name;
    }
    return names;
  }();
  return std::string(op) + ": " + arg + " has dtype " + str_of(dtype) +
         ", which et_copy does not move (supported: " + supported + ")";
}

bool restride_torch_tensor(PyObject* o, const TensorSpec& s) {
  PyObject* sizes = PyTuple_New(static_cast<Py_ssize_t>(s.rank));
  PyObject* strides = PyTuple_New(static_cast<Py_ssize_t>(s.rank));
  bool ok = sizes != nullptr && strides != nullptr;
  for (size_t i = 0; ok && i < s.rank; ++i) {
    PyObject* a = PyLong_FromLongLong(s.sizes[i]);
    PyObject* b = PyLong_FromLongLong(s.strides[i]);
    ok = a != nullptr && b != nullptr;
    if (a != nullptr) {
      PyTuple_SET_ITEM(sizes, static_cast<Py_ssize_t>(i), a);
    }
    if (b != nullptr) {
      PyTuple_SET_ITEM(strides, static_cast<Py_ssize_t>(i), b);
    }
  }
  // Through Python, so autograd's and torch's own checks apply as they would
  // to the caller's out.as_strided_(...).
  PyObject* r = ok ? PyObject_CallMethod(o, "as_strided_", "OO", sizes, strides) : nullptr;
  Py_XDECREF(sizes);
  Py_XDECREF(strides);
  Py_XDECREF(r);
  return r != nullptr;
}

} // namespace et_copy::bindings
