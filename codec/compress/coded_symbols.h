// The symbols of a lossy segment before entropy coding, and the escape rule every encoder path applies.
#pragma once

#include <cstdint>
#include <vector>

#include "codec/common/rans.h"

namespace kvstream::codec {

// The symbols of one lossy segment, plus what a table-driven encoder needs.
struct Symbols {
  std::vector<uint8_t> symbols;   // [rows][symbols per row]
  std::vector<uint16_t> escapes;  // fp16 values of the escape symbols, in order
};

// Escapes every symbol the row position's model cannot code (frequency 0), keeping its value exact-ish,
// and collects the fp16 values of all escape symbols in order. models: one per symbol of a row; x: the
// values the symbols were quantised from, [rows][models.size()].
void EscapeUncodable(const std::vector<const RansModel*>& models, const float* x, Symbols* s);

}  // namespace kvstream::codec
