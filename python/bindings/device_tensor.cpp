#include "device_tensor.h"

#include <structmember.h>

#include <algorithm>
#include <numeric>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <string>

#include "device_buffer.h"
#include "failure.h"
#include "torch_tensor.h"

namespace py = pybind11;

namespace et_copy::bindings {

namespace {

using executorch::runtime::Error;

constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max(); // ExecuTorch's SizesType is int32
constexpr long kCuda = 1;                                         // ExecuTorch's DeviceType::CUDA

struct DeviceTensorObject {
  PyObject ob_base;
  PyObject* weakrefs;
  PyObject* buffer;     // the et_copy._C.DeviceBuffer, which keeps `memory` alive
  DeviceBuffer* memory; // inside `buffer`
  PyObject* dtype;      // the torch.dtype
  PyObject* device;     // the (type, index) tuple it was made with: et_copy's Device
  size_t itemsize;
  TensorSpec spec; // all the kernels see but the address, which is memory->ptr() at each read
};

PyTypeObject* g_type = nullptr; // made at import, kept for the life of the process

DeviceTensorObject* as_tensor(PyObject* o) {
  return reinterpret_cast<DeviceTensorObject*>(o);
}

std::string repr_of(py::handle o) {
  return py::repr(o);
}

PyObject* int_tuple_of(const int64_t* values, size_t n) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(n));
  for (size_t i = 0; t != nullptr && i < n; ++i) {
    PyObject* v = PyLong_FromLongLong(values[i]);
    if (v == nullptr) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), v);
  }
  return t;
}

// A shape, dtype and dim order, checked: what et_copy.empty allocates and a
// DeviceTensor describes. spec holds dtype, rank, sizes (also the
// capacity), dense strides and dim order.
struct Layout {
  TensorSpec spec;
  size_t itemsize = 0;
  uint64_t nbytes = 0;
  std::string shape_text; // for messages: the shape as Python shows a tuple
};

// tuple(operator.index(v) for v in seq); TypeError naming op and arg if not.
py::tuple int_tuple(const std::string& op, const char* arg, py::handle seq) {
  const std::string problem = op + ": " + arg + " must be a sequence of ints, got ";
  py::object items = py::reinterpret_steal<py::object>(PySequence_Fast(seq.ptr(), ""));
  if (!items) {
    PyErr_Clear();
    throw py::type_error(problem + Py_TYPE(seq.ptr())->tp_name);
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(items.ptr());
  py::tuple out(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = PyNumber_Index(PySequence_Fast_GET_ITEM(items.ptr(), i));
    if (v == nullptr) {
      PyErr_Clear();
      throw py::type_error(problem + repr_of(seq));
    }
    PyTuple_SET_ITEM(out.ptr(), i, v);
  }
  return out;
}

// The value of a Python int, clamped to int64; `fits` (if given) says whether it was.
int64_t int64_of(py::handle v, bool* fits = nullptr) {
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (fits != nullptr) {
    *fits = overflow == 0;
  }
  return overflow > 0 ? std::numeric_limits<int64_t>::max() : overflow < 0 ? std::numeric_limits<int64_t>::min() : x;
}

// Every rule a DeviceTensor's shape, dtype and dim order obey, each refused
// by name: sizes that are negative, beyond int32 or more than kMaxTensorDims; a dtype
// et_copy does not move; a dim order that is no permutation (None: the
// natural order); a byte count beyond 64 bits; strides beyond int64.
Layout check_layout(const std::string& op, py::handle shape_arg, py::handle dtype, py::handle order_arg) {
  const py::tuple shape = int_tuple(op, "shape", shape_arg);
  const std::string shape_text = repr_of(shape);
  bool negative = false, too_large = false;
  for (py::handle v : shape) {
    const int64_t size = int64_of(v);
    negative = negative || size < 0;
    too_large = too_large || size > kMaxSize;
  }
  if (negative) {
    throw py::value_error(op + ": shape " + shape_text + " has a negative size");
  }
  if (too_large) {
    // Memory for a larger dim could be allocated but never copied.
    throw py::value_error(op + ": shape " + shape_text +
                          " does not fit ExecuTorch's tensor metadata (a dim of at most " + std::to_string(kMaxSize) +
                          " elements)");
  }
  const size_t rank = shape.size();
  if (rank > kMaxTensorDims) {
    throw Failure(Error::InvalidArgument, op + ": shape " + shape_text + " has " + std::to_string(rank) +
                                              " dims; ExecuTorch supports at most " + std::to_string(kMaxTensorDims));
  }
  Layout l;
  l.shape_text = shape_text;
  TensorSpec& s = l.spec;
  s.dtype = torch_dtype_code(dtype.ptr());
  if (s.dtype < 0) {
    throw py::type_error(unsupported_dtype_message(op.c_str(), "the tensor", dtype.ptr()));
  }
  s.rank = rank;
  for (size_t i = 0; i < rank; ++i) {
    s.sizes[i] = int64_of(shape[i]);
  }
  if (order_arg.is_none()) {
    std::iota(s.dim_order, s.dim_order + rank, int64_t{0}); // the natural order
  } else {
    const py::tuple order = int_tuple(op, "dim_order", order_arg);
    // The permutation rule is dense_strides', asked about a shape of ones
    // (whose strides cannot overflow).
    TensorSpec ones;
    ones.rank = order.size();
    bool all_fit = ones.rank <= kMaxTensorDims;
    for (size_t i = 0; all_fit && i < ones.rank; ++i) {
      ones.sizes[i] = 1;
      ones.dim_order[i] = int64_of(order[i], &all_fit);
    }
    if (ones.rank != rank || !all_fit || !dense_strides(ones)) {
      throw py::value_error(op + ": dim_order " + repr_of(order) + " is not a permutation of the " +
                            std::to_string(rank) + " dims of shape " + shape_text);
    }
    std::copy(ones.dim_order, ones.dim_order + rank, s.dim_order);
  }
  l.itemsize = torch_itemsize(s.dtype);
  bool empty = false;
  for (size_t i = 0; i < rank; ++i) {
    empty = empty || s.sizes[i] == 0;
  }
  uint64_t nbytes = empty ? 0 : l.itemsize;
  bool overflow = false;
  for (size_t i = 0; !empty && i < rank; ++i) {
    overflow = overflow || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(s.sizes[i]), &nbytes);
  }
  if (overflow) {
    py::object exact = py::int_(l.itemsize);
    for (py::handle v : shape) {
      exact = py::reinterpret_steal<py::object>(PyNumber_Multiply(exact.ptr(), v.ptr()));
      if (!exact) {
        throw py::error_already_set(); // MemoryError: exact ints of at most 31 bits, at most 16 of them
      }
    }
    throw py::value_error(op + ": shape " + shape_text + " of " + std::string(py::str(dtype)) + " needs " +
                          std::string(py::str(exact)) + " bytes, beyond a 64-bit size");
  }
  l.nbytes = nbytes;
  if (!dense_strides(s)) { // a permutation of sizes that fit int32: only an int64 overflow is left
    const py::object order = py::reinterpret_steal<py::object>(int_tuple_of(s.dim_order, rank));
    throw py::value_error(op + ": shape " + shape_text + " laid out in dim_order " + (order ? repr_of(order) : "?") +
                          " has strides beyond int64");
  }
  std::copy(s.sizes, s.sizes + rank, s.capacity);
  s.has_capacity = true;
  return l;
}

// A CUDA (type, index) tuple of ints whose index fits ExecuTorch's 8 bits
// (the kernels name an index the allocator lacks); et_copy's Device is one.
void check_device(const std::string& op, py::handle device, TensorSpec& s) {
  PyObject* d = device.ptr();
  if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) != 2 || !PyLong_Check(PyTuple_GET_ITEM(d, 0)) ||
      !PyLong_Check(PyTuple_GET_ITEM(d, 1))) {
    throw py::type_error(op + ": device must be a (type, index) tuple of ints, such as et_copy's Device, got " +
                         repr_of(device));
  }
  const int64_t type = int64_of(PyTuple_GET_ITEM(d, 0));
  const int64_t index = int64_of(PyTuple_GET_ITEM(d, 1));
  if (type != kCuda || index < kMinDeviceIndex || index > kMaxDeviceIndex) {
    throw py::value_error(op + ": device " + repr_of(device) +
                          " must be a CUDA device (type 1) with an index ExecuTorch can hold (" +
                          std::to_string(kMinDeviceIndex) + ".." + std::to_string(kMaxDeviceIndex) + ")");
  }
  s.device_type = static_cast<int>(type);
  s.device_index = static_cast<int>(index);
}

// The memory: a live DeviceBuffer (or slice of one) of at least l.nbytes.
DeviceBuffer* check_buffer(const std::string& op, py::handle buffer, const Layout& l, py::handle dtype) {
  static PyTypeObject* const device_buffer = reinterpret_cast<PyTypeObject*>(py::type::of<DeviceBuffer>().ptr());
  if (Py_TYPE(buffer.ptr()) != device_buffer) {
    throw py::type_error(op + ": buffer must be an et_copy._C.DeviceBuffer (or a slice of one), got " +
                         Py_TYPE(buffer.ptr())->tp_name);
  }
  auto* memory = buffer.cast<DeviceBuffer*>();
  if (memory->freed()) {
    throw py::value_error(op + ": buffer was freed");
  }
  if (l.nbytes > memory->nbytes()) {
    throw py::value_error(op + ": shape " + l.shape_text + " of " + std::string(py::str(dtype)) + " needs " +
                          std::to_string(l.nbytes) + " bytes, more than the buffer's " +
                          std::to_string(memory->nbytes()));
  }
  return memory;
}

PyObject* make(PyTypeObject* cls, const Layout& l, py::handle buffer, DeviceBuffer* memory, py::handle dtype,
               py::handle device, const TensorSpec& placed, bool dynamic) {
  PyObject* o = cls->tp_alloc(cls, 0);
  if (o == nullptr) {
    throw py::error_already_set(); // MemoryError
  }
  DeviceTensorObject* t = as_tensor(o);
  new (&t->spec) TensorSpec(l.spec);
  t->spec.device_type = placed.device_type;
  t->spec.device_index = placed.device_index;
  t->spec.dynamism = dynamic ? 1 : 0; // DYNAMIC_BOUND : STATIC
  t->itemsize = l.itemsize;
  t->memory = memory;
  t->buffer = buffer.inc_ref().ptr();
  t->dtype = dtype.inc_ref().ptr();
  t->device = device.inc_ref().ptr();
  return o;
}

bool truth(py::handle v) {
  const int b = PyObject_IsTrue(v.ptr());
  if (b < 0) {
    throw py::error_already_set();
  }
  return b == 1;
}

// DeviceTensor(buffer, dtype, device, shape, dim_order, dynamic)
PyObject* tensor_new(PyTypeObject* cls, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"buffer", "dtype", "device", "shape", "dim_order", "dynamic", nullptr};
  PyObject *buffer, *dtype, *device, *shape, *dim_order, *dynamic;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOO:DeviceTensor", const_cast<char**>(kwlist), &buffer, &dtype,
                                   &device, &shape, &dim_order, &dynamic)) {
    return nullptr;
  }
  return guarded([&] {
    const std::string op = "et_copy.DeviceTensor";
    const Layout l = check_layout(op, shape, dtype, dim_order);
    TensorSpec placed;
    check_device(op, device, placed);
    DeviceBuffer* memory = check_buffer(op, buffer, l, dtype);
    return make(cls, l, buffer, memory, dtype, device, placed, truth(dynamic));
  });
}

// DeviceTensor._allocate(shape, dtype, device, dim_order, dynamic, alignment):
// et_copy.empty's memory and tensor, its arguments checked once, here.
PyObject* tensor_allocate(PyObject* cls, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"shape", "dtype", "device", "dim_order", "dynamic", "alignment", nullptr};
  PyObject *shape, *dtype, *device, *dim_order, *dynamic;
  Py_ssize_t alignment = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOn:_allocate", const_cast<char**>(kwlist), &shape, &dtype,
                                   &device, &dim_order, &dynamic, &alignment)) {
    return nullptr;
  }
  return guarded([&] {
    const std::string op = "et_copy.empty";
    const Layout l = check_layout(op, shape, dtype, dim_order);
    TensorSpec placed;
    check_device(op, device, placed);
    const bool dyn = truth(dynamic);
    py::object buffer = py::cast(std::make_unique<DeviceBuffer>(static_cast<size_t>(l.nbytes), placed.device_type,
                                                                placed.device_index, static_cast<size_t>(alignment)));
    return make(reinterpret_cast<PyTypeObject*>(cls), l, buffer, buffer.cast<DeviceBuffer*>(), dtype, device, placed,
                dyn);
  });
}

void tensor_dealloc(PyObject* o) {
  PyTypeObject* type = Py_TYPE(o);
  PyObject_GC_UnTrack(o);
  DeviceTensorObject* t = as_tensor(o);
  if (t->weakrefs != nullptr) {
    PyObject_ClearWeakRefs(o);
  }
  Py_CLEAR(t->buffer); // frees the memory when this was its last holder
  Py_CLEAR(t->dtype);
  Py_CLEAR(t->device);
  type->tp_free(o);
  Py_DECREF(type); // an instance of a heap type holds its type
}

// Immutable, like a tuple: it visits what it holds and clears nothing.
int tensor_traverse(PyObject* o, visitproc visit, void* arg) {
  DeviceTensorObject* t = as_tensor(o);
  Py_VISIT(Py_TYPE(o));
  Py_VISIT(t->buffer);
  Py_VISIT(t->dtype);
  Py_VISIT(t->device);
  return 0;
}

// Elements of the current shape: at most the capacity's, whose bytes fit 64 bits.
uint64_t numel(const TensorSpec& s) {
  uint64_t n = 1;
  for (size_t i = 0; i < s.rank; ++i) {
    n *= static_cast<uint64_t>(s.sizes[i]);
  }
  return n;
}

PyObject* get_shape(PyObject* o, void*) {
  return torch_size(as_tensor(o)->spec.sizes, as_tensor(o)->spec.rank);
}
PyObject* get_capacity(PyObject* o, void*) {
  return torch_size(as_tensor(o)->spec.capacity, as_tensor(o)->spec.rank);
}
PyObject* get_dtype(PyObject* o, void*) {
  return Py_NewRef(as_tensor(o)->dtype);
}
PyObject* get_device(PyObject* o, void*) {
  return Py_NewRef(as_tensor(o)->device);
}
PyObject* get_dim_order(PyObject* o, void*) {
  return int_tuple_of(as_tensor(o)->spec.dim_order, as_tensor(o)->spec.rank);
}
PyObject* get_dynamic(PyObject* o, void*) {
  return PyBool_FromLong(as_tensor(o)->spec.dynamism != 0);
}
PyObject* get_itemsize(PyObject* o, void*) {
  return PyLong_FromSize_t(as_tensor(o)->itemsize);
}
PyObject* get_nbytes(PyObject* o, void*) {
  return PyLong_FromUnsignedLongLong(numel(as_tensor(o)->spec) * as_tensor(o)->itemsize);
}
PyObject* get_capacity_nbytes(PyObject* o, void*) {
  return PyLong_FromSize_t(as_tensor(o)->memory->nbytes());
}
PyObject* get_freed(PyObject* o, void*) {
  return PyBool_FromLong(as_tensor(o)->memory->freed());
}
PyObject* get_buffer(PyObject* o, void*) {
  return Py_NewRef(as_tensor(o)->buffer);
}

PyObject* tensor_dim(PyObject* o, PyObject*) {
  return PyLong_FromSize_t(as_tensor(o)->spec.rank);
}
PyObject* tensor_numel(PyObject* o, PyObject*) {
  return PyLong_FromUnsignedLongLong(numel(as_tensor(o)->spec));
}
PyObject* tensor_data_ptr(PyObject* o, PyObject*) {
  return PyLong_FromSize_t(as_tensor(o)->memory->ptr());
}
PyObject* tensor_free(PyObject* o, PyObject*) {
  as_tensor(o)->memory->free();
  Py_RETURN_NONE;
}

// DeviceTensor(shape=(4, 3), dtype=torch.float32, device='cuda:0'[, capacity=(8, 3)][, freed])
PyObject* tensor_repr(PyObject* o) {
  const DeviceTensorObject* t = as_tensor(o);
  py::object shape = py::reinterpret_steal<py::object>(int_tuple_of(t->spec.sizes, t->spec.rank));
  py::object capacity = py::reinterpret_steal<py::object>(int_tuple_of(t->spec.capacity, t->spec.rank));
  if (!shape || !capacity) {
    return nullptr;
  }
  py::object dynamic = t->spec.dynamism != 0
                           ? py::reinterpret_steal<py::object>(PyUnicode_FromFormat(", capacity=%R", capacity.ptr()))
                           : py::reinterpret_steal<py::object>(PyUnicode_FromString(""));
  if (!dynamic) {
    return nullptr;
  }
  return PyUnicode_FromFormat("DeviceTensor(shape=%R, dtype=%S, device='%S'%U%s)", shape.ptr(), t->dtype, t->device,
                              dynamic.ptr(), t->memory->freed() ? ", freed" : "");
}

PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, nullptr, "The shape the tensor holds now (a torch.Size).", nullptr},
    {"capacity", get_capacity, nullptr, "The shape this tensor's memory was sized for.", nullptr},
    {"dtype", get_dtype, nullptr, "The torch.dtype.", nullptr},
    {"device", get_device, nullptr, "The device the kernels see: et_copy's Device (type, index).", nullptr},
    {"dim_order", get_dim_order, nullptr, "The dims, outermost first.", nullptr},
    {"dynamic", get_dynamic, nullptr, "Whether a copy may give it a smaller shape within its capacity.", nullptr},
    {"itemsize", get_itemsize, nullptr, "Bytes per element.", nullptr},
    {"nbytes", get_nbytes, nullptr, "Bytes of the current shape (at most capacity_nbytes).", nullptr},
    {"capacity_nbytes", get_capacity_nbytes, nullptr, "Bytes of the memory.", nullptr},
    {"freed", get_freed, nullptr, "Whether the memory went back to the allocator.", nullptr},
    {"_buffer", get_buffer, nullptr, "The DeviceBuffer (or slice) holding the memory.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef tensor_methods[] = {
    {"dim", tensor_dim, METH_NOARGS, "The number of dims."},
    {"numel", tensor_numel, METH_NOARGS, "The number of elements of the current shape."},
    {"data_ptr", tensor_data_ptr, METH_NOARGS, "The memory's address (0 once freed)."},
    {"free", tensor_free, METH_NOARGS,
     "Returns the memory to the allocator now (idempotent); a slice's memory is its parent's to free."},
    {"_allocate", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(tensor_allocate)),
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "_allocate(shape, dtype, device, dim_order, dynamic, alignment): et_copy.empty's allocation."},
    {nullptr, nullptr, 0, nullptr},
};

constexpr const char kDoc[] =
    "DeviceTensor(buffer, dtype, device, shape, dim_order, dynamic)\n--\n\n"
    "Device memory with the metadata the kernels see, checked once here and read-only after. Use "
    "et_copy.DeviceTensor (this plus cpu() and the DLPack exports).";

} // namespace

bool is_device_tensor(PyObject* o) {
  return PyObject_TypeCheck(o, g_type);
}

bool read_device_tensor(PyObject* o, TensorSpec& s) {
  const DeviceTensorObject* t = as_tensor(o);
  s = t->spec;
  s.data = t->memory->ptr();
  return !t->memory->freed();
}

void set_device_tensor_shape(PyObject* o, const TensorSpec& s) {
  TensorSpec& spec = as_tensor(o)->spec;
  std::copy(s.sizes, s.sizes + spec.rank, spec.sizes);
  std::copy(s.strides, s.strides + spec.rank, spec.strides);
}

void bind_device_tensor(py::module_& m) {
  static PyMemberDef members[] = {
      {"__weaklistoffset__", T_PYSSIZET, offsetof(DeviceTensorObject, weakrefs), READONLY, nullptr},
      {nullptr, 0, 0, 0, nullptr},
  };
  static PyType_Slot slots[] = {
      {Py_tp_doc, const_cast<char*>(kDoc)},
      {Py_tp_new, reinterpret_cast<void*>(tensor_new)},
      {Py_tp_dealloc, reinterpret_cast<void*>(tensor_dealloc)},
      {Py_tp_traverse, reinterpret_cast<void*>(tensor_traverse)},
      {Py_tp_repr, reinterpret_cast<void*>(tensor_repr)},
      {Py_tp_getset, tensor_getset},
      {Py_tp_methods, tensor_methods},
      {Py_tp_members, members},
      {0, nullptr},
  };
  // Subclassable (et_copy.DeviceTensor adds Python methods), with no
  // attributes settable on the type or, lacking a __dict__, its instances.
  static PyType_Spec spec = {"et_copy._C.DeviceTensor", sizeof(DeviceTensorObject), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
                             slots};
  PyObject* type = PyType_FromSpec(&spec);
  if (type == nullptr) {
    throw py::error_already_set(); // MemoryError at import
  }
  g_type = reinterpret_cast<PyTypeObject*>(type);
  m.add_object("DeviceTensor", py::handle(type));
}

} // namespace et_copy::bindings
