// kvstream._kvstream: the C++ library for Python (the package kvstream re-exports it; docs/python.md).
#include <nanobind/nanobind.h>

#include "bindings/src/errors.h"
#include "bindings/src/module.h"

NB_MODULE(_kvstream, m) {
  m.doc() = "kvstream's C++ library: the codec, profiles, errors (import kvstream, not this module)";
  m.attr("__version__") = KVSTREAM_VERSION;
  kvstream::python::RegisterErrors(m);
  kvstream::python::RegisterProfile(m);
  kvstream::python::RegisterCodec(m);
  kvstream::python::RegisterStream(m);
}
