// UTF-8 scanning, coarse character classes and the GPT-2 pre-tokenizer, written by hand so the model
// module needs no regex or ICU dependency.
#include "model/unicode.h"

namespace kvstream::model {

std::vector<Utf8Char> ScanUtf8(const std::string& text) {
  std::vector<Utf8Char> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = s[i];
    uint32_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u);
    bool ok = len != 0 && i + len <= n;
    for (uint32_t k = 1; ok && k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (s[i + k] & 0x3Fu);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF: they are bytes, not characters.
    if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
               (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)) {
      ok = false;
    }
    if (ok) {
      out.push_back({cp, static_cast<uint32_t>(i), len, true});
      i += len;
    } else {
      out.push_back({b, static_cast<uint32_t>(i), 1, false});
      ++i;
    }
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

bool InRanges(uint32_t cp, const uint32_t (*ranges)[2], size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (cp >= ranges[i][0] && cp <= ranges[i][1]) return true;
  }
  return false;
}

constexpr uint32_t kSpaces[][2] = {{0x09, 0x0D}, {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},
                                   {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                                   {0x205F, 0x205F}, {0x3000, 0x3000}};
constexpr uint32_t kNumbers[][2] = {
    {0x30, 0x39},     {0xB2, 0xB3},     {0xB9, 0xB9},     {0xBC, 0xBE},     {0x660, 0x669},   {0x6F0, 0x6F9},
    {0x7C0, 0x7C9},   {0x966, 0x96F},   {0x9E6, 0x9EF},   {0xA66, 0xA6F},   {0xAE6, 0xAEF},   {0xB66, 0xB6F},
    {0xBE6, 0xBF2},   {0xC66, 0xC6F},   {0xCE6, 0xCEF},   {0xD66, 0xD78},   {0xE50, 0xE59},   {0xED0, 0xED9},
    {0xF20, 0xF33},   {0x1040, 0x1049}, {0x17E0, 0x17E9}, {0x1810, 0x1819}, {0x2070, 0x2070}, {0x2074, 0x2079},
    {0x2080, 0x2089}, {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF}, {0x2776, 0x2793},
    {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303A}, {0x3192, 0x3195}, {0x3220, 0x3229}, {0x3248, 0x324F},
    {0x3251, 0x325F}, {0x3280, 0x3289}, {0x32B1, 0x32BF}, {0xFF10, 0xFF19}, {0x1D7CE, 0x1D7FF}};
// Neither letter nor number nor space: punctuation, symbols, marks, controls, emoji.
constexpr uint32_t kOther[][2] = {
    {0x00, 0x40},       {0x5B, 0x60},       {0x7B, 0xA9},       {0xAB, 0xB4},       {0xB6, 0xB9},
    {0xBB, 0xBF},       {0xD7, 0xD7},       {0xF7, 0xF7},       {0x2C2, 0x2C5},     {0x2D2, 0x2DF},
    {0x2E5, 0x2EB},     {0x2ED, 0x2ED},     {0x2EF, 0x36F},     {0x37E, 0x37E},     {0x384, 0x385},
    {0x387, 0x387},     {0x483, 0x489},     {0x55A, 0x55F},     {0x589, 0x58A},     {0x591, 0x5C7},
    {0x5F3, 0x5F4},     {0x600, 0x61F},     {0x64B, 0x65F},     {0x66A, 0x66D},     {0x6D4, 0x6D4},
    {0x900, 0x903},     {0x93A, 0x93C},     {0x93E, 0x94F},     {0x951, 0x957},     {0x962, 0x965},
    {0xE31, 0xE31},     {0xE34, 0xE3F},     {0xE47, 0xE4F},     {0x2010, 0x206F},   {0x20A0, 0x20FF},
    {0x2100, 0x2101},   {0x2103, 0x2106},   {0x2108, 0x2109},   {0x2116, 0x2118},   {0x211E, 0x2123},
    {0x2125, 0x2125},   {0x2127, 0x2127},   {0x2129, 0x2129},   {0x212E, 0x212E},   {0x2190, 0x245F},
    {0x2500, 0x2775},   {0x2794, 0x2BFF},   {0x2E00, 0x2E7F},   {0x3001, 0x3006},   {0x3008, 0x3020},
    {0x302A, 0x3030},   {0x303D, 0x303F},   {0x3099, 0x309C},   {0x30A0, 0x30A0},   {0x30FB, 0x30FB},
    {0xD800, 0xF8FF},   {0xFD3E, 0xFD3F},   {0xFE00, 0xFE6F},   {0xFEFF, 0xFEFF},   {0xFF01, 0xFF0F},
    {0xFF1A, 0xFF20},   {0xFF3B, 0xFF40},   {0xFF5B, 0xFF65},   {0xFFE0, 0xFFFF},   {0x1F000, 0x1FBFF},
    {0xE0000, 0x10FFFF}};

template <size_t N>
bool In(uint32_t cp, const uint32_t (&ranges)[N][2]) {
  return InRanges(cp, ranges, N);
}

}  // namespace

bool IsSpace(const Utf8Char& c) { return c.valid && In(c.cp, kSpaces); }
bool IsNumber(const Utf8Char& c) { return c.valid && In(c.cp, kNumbers); }
bool IsLetter(const Utf8Char& c) {
  return c.valid && !In(c.cp, kOther) && !In(c.cp, kSpaces) && !In(c.cp, kNumbers);
}

namespace {

// GPT-2's pattern over one fragment [begin, end) of `cs`; appends the byte strings of its pieces.
void SplitFragment(const std::string& text, const std::vector<Utf8Char>& cs, size_t begin, size_t end,
                   std::vector<std::string>& out) {
  auto emit = [&](size_t a, size_t b) {
    out.push_back(text.substr(cs[a].offset, cs[b - 1].offset + cs[b - 1].length - cs[a].offset));
  };
  auto cp_at = [&](size_t i) -> uint32_t { return i < end && cs[i].valid ? cs[i].cp : 0xFFFFFFFFu; };
  size_t i = begin;
  while (i < end) {
    // Contractions: 's 't 'm 'd 're 've 'll (case-sensitive, as in GPT-2).
    if (cp_at(i) == '\'') {
      const uint32_t a = cp_at(i + 1), b = cp_at(i + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        emit(i, i + 3);
        i += 3;
        continue;
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    size_t j = (cp_at(i) == ' ' && i + 1 < end && !IsSpace(cs[i + 1])) ? i + 1 : i;
    if (!IsSpace(cs[j])) {
      size_t k = j + 1;
      if (IsLetter(cs[j])) {
        while (k < end && IsLetter(cs[k])) ++k;
      } else if (IsNumber(cs[j])) {
        while (k < end && IsNumber(cs[k])) ++k;
      } else {
        while (k < end && !IsSpace(cs[k]) && !IsLetter(cs[k]) && !IsNumber(cs[k])) ++k;
      }
      emit(i, k);
      i = k;
      continue;
    }
    // '\s+(?!\S)' leaves the last space of a run to the word that follows; '\s+' takes a lone one.
    size_t k = i;
    while (k < end && IsSpace(cs[k])) ++k;
    if (k < end && k - i > 1) --k;
    emit(i, k);
    i = k;
  }
}

}  // namespace

std::vector<std::string> SplitGpt2(const std::string& text, bool split_digits) {
  const std::vector<Utf8Char> cs = ScanUtf8(text);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (split_digits && IsNumber(cs[i])) {
      SplitFragment(text, cs, start, i, out);
      SplitFragment(text, cs, i, i + 1, out);
      start = i + 1;
    }
  }
  SplitFragment(text, cs, start, cs.size(), out);
  return out;
}

uint32_t ByteToUnicode(uint8_t b) {
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
  // The 68 other bytes map, in order, to 256, 257, ...
  uint32_t n = 0;
  for (uint32_t x = 0; x < b; ++x) {
    if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) ++n;
  }
  return 256 + n;
}

int UnicodeToByte(uint32_t cp) {
  static const std::vector<int> inverse = [] {
    std::vector<int> inv(512, -1);
    for (int b = 0; b < 256; ++b) inv[ByteToUnicode(static_cast<uint8_t>(b))] = b;
    return inv;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

}  // namespace kvstream::model
