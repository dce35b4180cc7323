// The .npy member format (model/npy.h): writing the header, then reading a member: its header's dictionary, its
// data and its checksum.
#include "model/npy.h"

#include <algorithm>
#include <cstring>

#include "model/binary_reader.h"

namespace kvstream::model {
namespace {

constexpr uint64_t kMaxNpyHeaderBytes = 1 << 20;
constexpr int kMaxDims = 8;

// A cursor over a .npy header's dictionary, a Python literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (30, 2048, 192), }
class DictCursor {
 public:
  DictCursor(const std::string& text, std::string member) : text_(text), member_(std::move(member)) {}

  Status Error(const std::string& what) const {
    return Status::CorruptData(member_ + ": .npy header: " + what + " at character " + std::to_string(at_) + " of '" +
                               text_ + "'");
  }
  void SkipSpaces() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n')) ++at_;
  }
  bool Accept(char c) {
    SkipSpaces();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  Status Expect(char c) { return Accept(c) ? Status::Ok() : Error(std::string("expected '") + c + "'"); }
  Result<std::string> String() {
    SkipSpaces();
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) return Error("expected a string");
    const char quote = text_[at_++];
    const size_t close = text_.find(quote, at_);
    if (close == std::string::npos) return Error("unterminated string");
    std::string s = text_.substr(at_, close - at_);
    at_ = close + 1;
    return s;
  }
  Result<bool> Boolean() {
    SkipSpaces();
    for (const bool value : {true, false}) {
      const std::string word = value ? "True" : "False";
      if (text_.compare(at_, word.size(), word) == 0) {
        at_ += word.size();
        return value;
      }
    }
    return Error("expected True or False");
  }
  // A tuple of non-negative integers: (), (3,) or (2, 3).
  Result<std::vector<int64_t>> Shape() {
    KVSTREAM_RETURN_IF_ERROR(Expect('('));
    std::vector<int64_t> dims;
    while (!Accept(')')) {
      SkipSpaces();
      int64_t d = 0;
      size_t digits = 0;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
        if (++digits > 15) return Error("a dimension beyond 10^15");
        d = d * 10 + (text_[at_++] - '0');
      }
      if (digits == 0) return Error("expected a dimension");
      if (at_ < text_.size() && text_[at_] == 'L') ++at_;  // Python 2's long literal
      if (dims.size() == kMaxDims) return Error("more than " + std::to_string(kMaxDims) + " dimensions");
      dims.push_back(d);
      if (!Accept(',')) {
        KVSTREAM_RETURN_IF_ERROR(Expect(')'));
        break;
      }
    }
    return dims;
  }
  bool AtEnd() {
    SkipSpaces();
    return at_ == text_.size();
  }

 private:
  const std::string& text_;
  std::string member_;
  size_t at_ = 0;
};

// The bytes of one value of `descr`, or 0 for a dtype a kv dump does not hold.
size_t ItemSize(const std::string& descr) {
  if (descr == "<f2") return 2;
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<f8" || descr == "<i8") return 8;
  return 0;
}

// A shape as Python writes it, for errors: (), (3,) or (2, 3).
std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

std::vector<uint8_t> NpyHeader(const char* descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.erase(dims.size() - 2);  // a 1-tuple keeps its trailing comma: "(3,)"
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  // The dictionary's length: a little-endian uint16 in version 1.0.
  out.push_back(static_cast<uint8_t>(dict.size()));
  out.push_back(static_cast<uint8_t>(dict.size() >> 8));
  out.insert(out.end(), dict.begin(), dict.end());
  return out;
}

Result<NpyArray> ReadNpyMember(const Source& src, const std::string& member, const Member& m,
                               std::vector<uint8_t>* data) {
  KVSTREAM_ASSIGN_OR_RETURN(const uint64_t at, MemberDataOffset(src, member, m));
  // The fixed prefix: magic, version, and the header's length (2 bytes in version 1, 4 after).
  KVSTREAM_ASSIGN_OR_RETURN(const std::vector<uint8_t> prefix, src.Bytes(at, std::min<uint64_t>(m.size, 12), member));
  ByteReader in(prefix.data(), prefix.size(), member);
  KVSTREAM_ASSIGN_OR_RETURN(std::string magic, in.ReadString(6, ".npy magic"));
  if (magic != "\x93NUMPY") return in.Error(".npy magic", "not a .npy file");
  KVSTREAM_ASSIGN_OR_RETURN(uint8_t major, in.Read<uint8_t>(".npy version"));
  KVSTREAM_RETURN_IF_ERROR(in.Read<uint8_t>(".npy version").status());
  if (major < 1 || major > 3) return Status::Unsupported(member + ": .npy format version " + std::to_string(major));
  uint64_t header_bytes = 0;
  if (major == 1) {
    KVSTREAM_ASSIGN_OR_RETURN(header_bytes, in.Read<uint16_t>(".npy header length"));
  } else {
    KVSTREAM_ASSIGN_OR_RETURN(header_bytes, in.Read<uint32_t>(".npy header length"));
  }
  if (header_bytes > kMaxNpyHeaderBytes) {
    return in.Error(".npy header", std::to_string(header_bytes) + " bytes, at most 1 MiB");
  }
  const uint64_t head = in.offset() + header_bytes;
  if (head > m.size) {
    return in.Error(".npy header", std::to_string(header_bytes) + " bytes, the member holds " +
                                       std::to_string(m.size - in.offset()) + " after its prefix");
  }
  KVSTREAM_ASSIGN_OR_RETURN(const std::vector<uint8_t> head_bytes, src.Bytes(at, head, member + ": .npy header"));
  const std::string text(head_bytes.begin() + static_cast<std::ptrdiff_t>(in.offset()), head_bytes.end());
  DictCursor dict(text, member);
  NpyArray a;
  bool fortran_order = false, has_descr = false, has_order = false, has_shape = false;
  KVSTREAM_RETURN_IF_ERROR(dict.Expect('{'));
  while (!dict.Accept('}')) {
    KVSTREAM_ASSIGN_OR_RETURN(std::string key, dict.String());
    KVSTREAM_RETURN_IF_ERROR(dict.Expect(':'));
    if (key == "descr" && !has_descr) {
      KVSTREAM_ASSIGN_OR_RETURN(a.descr, dict.String());
      has_descr = true;
    } else if (key == "fortran_order" && !has_order) {
      KVSTREAM_ASSIGN_OR_RETURN(fortran_order, dict.Boolean());
      has_order = true;
    } else if (key == "shape" && !has_shape) {
      KVSTREAM_ASSIGN_OR_RETURN(a.shape, dict.Shape());
      has_shape = true;
    } else {
      return dict.Error("unexpected or repeated key '" + key + "'");
    }
    if (!dict.Accept(',')) {
      KVSTREAM_RETURN_IF_ERROR(dict.Expect('}'));
      break;
    }
  }
  if (!dict.AtEnd()) return dict.Error("trailing characters");
  if (!has_descr || !has_order || !has_shape) return dict.Error("needs the keys descr, fortran_order and shape");
  const size_t item = ItemSize(a.descr);
  if (item == 0) {
    return Status::Unsupported(member + ": dtype '" + a.descr + "' (kv dumps hold <f4, <f2, <f8, <i4 or <i8)");
  }
  const uint64_t data_bytes = m.size - head;
  a.numel = 1;
  for (int64_t d : a.shape) {
    // Every dimension is below 10^15, and the product never exceeds the bytes there are.
    if (d != 0 && a.numel > data_bytes / static_cast<uint64_t>(d)) {
      return in.Error(".npy data",
                      "shape needs more values than the " + std::to_string(data_bytes) + " data bytes hold");
    }
    a.numel *= static_cast<uint64_t>(d);
  }
  if (a.numel * item != data_bytes) {
    return in.Error(".npy data", std::to_string(data_bytes) + " bytes, the shape of " + a.descr + " needs " +
                                     std::to_string(a.numel * item));
  }
  if (fortran_order && a.shape.size() > 1) {
    return Status::Unsupported(member + ": Fortran (column-major) order; write C order");
  }
  data->resize(static_cast<size_t>(data_bytes));
  KVSTREAM_RETURN_IF_ERROR(src.Read(at + head, data_bytes, data->data(), member + ": .npy data"));
  if (ZipCrc32(data->data(), data->size(), ZipCrc32(head_bytes.data(), head_bytes.size())) != m.crc) {
    return Status::CorruptData(member + ": CRC-32 mismatch: the file is corrupt");
  }
  a.data = data->data();
  return a;
}

int64_t IntAt(const NpyArray& a, uint64_t i) {
  if (a.descr == "<i4") {
    int32_t v;
    std::memcpy(&v, a.data + 4 * i, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, a.data + 8 * i, 8);
  return v;
}

Status ExpectArray(const NpyArray& a, const std::string& member, std::initializer_list<const char*> descrs,
                   const std::vector<int64_t>& shape) {
  bool known = false;
  std::string names;
  for (const char* d : descrs) {
    known |= a.descr == d;
    names += std::string(names.empty() ? "" : " or ") + d;
  }
  if (!known) return Status::Unsupported(member + ": dtype " + a.descr + ", expected " + names);
  if (a.shape != shape) {
    return Status::CorruptData(member + ": shape " + ShapeText(a.shape) + ", expected " + ShapeText(shape));
  }
  return Status::Ok();
}

}  // namespace kvstream::model
