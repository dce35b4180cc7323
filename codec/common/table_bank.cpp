// Serialisation of table banks (see table_bank.h).
#include "codec/common/table_bank.h"

#include <algorithm>
#include <string>

namespace kvstream::codec {

void WriteTableBank(const TableBank& bank, ByteWriter& out) {
  out.U8(static_cast<uint8_t>(bank.models.size()));
  for (const RansModel& m : bank.models) {
    const uint16_t* f = m.frequencies();
    const int alphabet = m.alphabet();
    int lo = 0, hi = 0;
    for (int s = 1; s < alphabet; ++s) {
      if (f[s] == 0) continue;
      if (lo == 0) lo = s;
      hi = s;
    }
    if (lo == 0) lo = hi = kSymbolZero;  // escapes only: one explicit zero
    out.U8(static_cast<uint8_t>(lo));
    out.U8(static_cast<uint8_t>(hi));
    out.U16(f[0]);
    for (int s = lo; s <= hi; ++s) out.U16(s < alphabet ? f[s] : 0);
  }
  if (bank.models.size() > 1) out.Raw(bank.index.data(), bank.index.size());
}

Status ReadTableBank(ByteReader& in, size_t channels, TableBank* bank) {
  uint8_t count = 0;
  KVSTREAM_RETURN_IF_ERROR(in.U8(&count, "table count"));
  if (count == 0) return Status::CorruptData(in.what() + ": table count = 0, expected 1..255");
  bank->models.clear();
  bank->models.reserve(count);
  uint16_t freq[256];
  for (int t = 0; t < count; ++t) {
    uint8_t lo = 0, hi = 0;
    KVSTREAM_RETURN_IF_ERROR(in.U8(&lo, "table lo"));
    KVSTREAM_RETURN_IF_ERROR(in.U8(&hi, "table hi"));
    if (lo == 0 || lo > hi) {
      return Status::CorruptData(in.what() + ": table " + std::to_string(t) + " symbol range [" + std::to_string(lo) +
                                 ", " + std::to_string(hi) + "] is empty or includes the escape symbol 0");
    }
    std::fill(freq, freq + 256, uint16_t{0});
    KVSTREAM_RETURN_IF_ERROR(in.U16(&freq[0], "table escape frequency"));
    for (int s = lo; s <= hi; ++s) KVSTREAM_RETURN_IF_ERROR(in.U16(&freq[s], "table frequency"));
    auto model = RansModel::FromFrequencies(freq, 256);
    // Stored bytes that fail the model's checks are corrupt data, whatever code the model gives.
    if (!model.ok()) return Status::CorruptData(in.what() + ": table " + std::to_string(t) + ": " + model.status().message());
    bank->models.push_back(std::move(model).value());
  }
  bank->index.assign(channels, 0);
  if (count > 1) {
    KVSTREAM_RETURN_IF_ERROR(in.Read(bank->index.data(), channels, "table index"));
    for (size_t c = 0; c < channels; ++c) {
      if (bank->index[c] >= count) {
        return Status::CorruptData(in.what() + ": table index of channel " + std::to_string(c) + " = " +
                                   std::to_string(bank->index[c]) + " >= table count " + std::to_string(count));
      }
    }
  }
  return Status::Ok();
}

}  // namespace kvstream::codec
