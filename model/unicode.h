// The little Unicode the tokenizers need: UTF-8 scanning that survives invalid bytes, coarse character
// classes (letter / number / whitespace) for GPT-2-style pre-tokenization, and GPT-2's byte <-> printable
// character mapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvstream::model {

// One character of a byte string: its code point and byte span. An invalid or truncated UTF-8 sequence
// yields one entry per byte with `valid` false, so no byte is ever lost.
struct Utf8Char {
  uint32_t cp = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
  bool valid = true;
};
std::vector<Utf8Char> ScanUtf8(const std::string& text);

// Appends the UTF-8 encoding of `cp`.
void AppendUtf8(uint32_t cp, std::string& out);

// \p{L}, \p{N} and \s as the GPT-2 regex means them. Exact for ASCII and Latin-1; for the rest of Unicode
// the common blocks of digits, spaces, punctuation, symbols, marks and emoji are classified and every
// other code point counts as a letter (which is what most of the remaining assigned code points are).
bool IsLetter(const Utf8Char& c);
bool IsNumber(const Utf8Char& c);
bool IsSpace(const Utf8Char& c);

// Splits text into pre-tokens with the GPT-2 pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// optionally first splitting every \p{N} into its own piece (SmolLM, StarCoder: "individual digits").
std::vector<std::string> SplitGpt2(const std::string& text, bool split_digits);

// GPT-2's reversible map from bytes to printable code points (the byte-level BPE alphabet).
uint32_t ByteToUnicode(uint8_t b);
// Inverse of ByteToUnicode; returns -1 for code points outside the alphabet.
int UnicodeToByte(uint32_t cp);

}  // namespace kvstream::model
