#include "bindings/src/errors.h"

#include <array>
#include <cstddef>

namespace kvstream::python {
namespace {

namespace nb = nanobind;

struct ErrorClass {
  StatusCode code;
  const char* name;
  PyObject* builtin_base;  // a Python exception the class also derives from, or null
  const char* doc;
};

// Indexed by StatusCode (kOk has none). InvalidArgumentError is also a ValueError and TimeoutError also
// Python's TimeoutError, so that code catching the builtin classes sees them.
std::array<PyObject*, static_cast<size_t>(StatusCode::kInternal) + 1> classes{};

}  // namespace

void RegisterErrors(nb::module_& m) {
  PyObject* error = PyErr_NewExceptionWithDoc(
      "kvstream.Error", "Base of every kvstream error; str(e) is the C++ library's message, e.code its StatusCode name.",
      PyExc_Exception, nullptr);
  if (error == nullptr) throw nb::python_error();
  m.attr("Error") = nb::steal(error);
  const ErrorClass subclasses[] = {
      {StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError,
       "An argument is unusable (shape, dtype, strides, option); the message names it."},
      {StatusCode::kCorruptData, "CorruptDataError", nullptr, "Bytes from a file or the wire are malformed (magic, CRC, sizes)."},
      {StatusCode::kUnsupported, "UnsupportedError", nullptr, "Well-formed but not handled (format version, dtype, device)."},
      {StatusCode::kNotFound, "NotFoundError", nullptr, "A file, model, context or profile does not exist."},
      {StatusCode::kResourceExhausted, "ResourceExhaustedError", nullptr, "A configured limit would be exceeded."},
      {StatusCode::kIoError, "IoError", nullptr, "The operating system refused a read, write or socket operation."},
      {StatusCode::kTimeout, "TimeoutError", PyExc_TimeoutError, "A deadline or configured timeout passed."},
      {StatusCode::kUnavailable, "UnavailableError", nullptr, "A peer is gone or refuses service."},
      {StatusCode::kPermissionDenied, "PermissionDeniedError", nullptr, "Authentication failed (wrong secret)."},
      {StatusCode::kCancelled, "CancelledError", nullptr, "The operation was cancelled."},
      {StatusCode::kInternal, "InternalError", nullptr, "A bug in kvstream."},
  };
  for (const ErrorClass& c : subclasses) {
    nb::object bases = c.builtin_base ? nb::object(nb::make_tuple(nb::handle(error), nb::handle(c.builtin_base)))
                                      : nb::object(nb::make_tuple(nb::handle(error)));
    const std::string qualified = std::string("kvstream.") + c.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), c.doc, bases.ptr(), nullptr);
    if (cls == nullptr) throw nb::python_error();
    m.attr(c.name) = nb::steal(cls);
    classes[static_cast<size_t>(c.code)] = cls;
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const size_t code = static_cast<size_t>(e.status().code());
      PyObject* cls = code < classes.size() && classes[code] ? classes[code] : classes[static_cast<size_t>(StatusCode::kInternal)];
      nb::object instance = nb::steal(PyObject_CallFunction(cls, "s", e.status().message().c_str()));
      if (!instance.is_valid()) return;  // the call's own error is set
      PyObject_SetAttrString(instance.ptr(), "code", nb::str(StatusCodeName(e.status().code())).ptr());
      PyErr_SetObject(cls, instance.ptr());
    }
  });
}

}  // namespace kvstream::python
