// The pieces of the kvstream._kvstream extension module, each registered by its own file.
#pragma once

#include <string>

#include <nanobind/nanobind.h>

#include "kvstream/level.h"

namespace kvstream::python {

// A level as Python callers write it: "fp16", "int8", "text", a lossy level n (int) or "L<n>".
Level LevelArgument(nanobind::handle value, const std::string& name);
// "channel-uniform", "transform" or "predicted".
QuantScheme SchemeArgument(const std::string& name);

void RegisterCodec(nanobind::module_& m);    // encode, decode_into, inspect
void RegisterProfile(nanobind::module_& m);  // Profile
void RegisterStream(nanobind::module_& m);   // Sender, Receiver

}  // namespace kvstream::python
