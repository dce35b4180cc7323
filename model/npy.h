// The .npy array format (NumPy's) of the KV dump's members: the header numpy writes (version 1.0), and a reader
// of a ZIP member holding a .npy file (versions 1, 2 and 3) that trusts nothing in it: the header is parsed as
// the Python literal it is, and its dtype and shape are checked against the bytes there are.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kvstream/status.h"
#include "model/zip_archive.h"

namespace kvstream::model {

// A .npy header (format version 1.0) for a C-order array of `descr` (such as "<f4") and `shape`: magic, version,
// and the dictionary padded so that the data starts on a multiple of 64 bytes, as numpy writes it.
std::vector<uint8_t> NpyHeader(const char* descr, const std::vector<int64_t>& shape);

// A .npy array as read: its dtype ("<f2", "<f4", "<f8", "<i4" or "<i8"), shape, and `numel` values at `data`
// (little-endian, C order), which points into the buffer ReadNpyMember filled.
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t numel = 0;
};

// ZIP member `member` (described by `m`) of `src` as a .npy array: its header parsed, its data (exactly what the
// shape needs) read into *data, and the member checked against its CRC-32. Errors name the member.
Result<NpyArray> ReadNpyMember(const Source& src, const std::string& member, const Member& m,
                               std::vector<uint8_t>* data);

// Value i (< a.numel) of an integer array ("<i4" or "<i8").
int64_t IntAt(const NpyArray& a, uint64_t i);

// Unsupported unless `a` has one of `descrs`, CorruptData unless it has `shape`; errors name `member`.
Status ExpectArray(const NpyArray& a, const std::string& member, std::initializer_list<const char*> descrs,
                   const std::vector<int64_t>& shape);

}  // namespace kvstream::model
