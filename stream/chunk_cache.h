// A bounded LRU cache of encoded chunks, keyed by (context, chunk, level), shared by every connection of
// a Sender. Entries are immutable and shared: a send in progress keeps its bytes alive after eviction.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kvstream/level.h"

namespace kvstream::stream {

struct EncodedChunk {
  std::vector<uint8_t> bytes;
  uint32_t crc32c = 0;
};

class ChunkCache {
 public:
  explicit ChunkCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  std::shared_ptr<const EncodedChunk> Get(const std::string& context, int chunk, Level level);
  // Inserts, evicting least recently used entries; an entry larger than the capacity is not kept.
  void Put(const std::string& context, int chunk, Level level, std::shared_ptr<const EncodedChunk> entry);
  void EraseContext(const std::string& context);
  uint64_t bytes() const;

 private:
  using Key = std::tuple<std::string, int, Level>;
  struct Slot {
    std::shared_ptr<const EncodedChunk> entry;
    std::list<Key>::iterator lru;
  };
  void EvictLocked();
  mutable std::mutex mu_;
  uint64_t capacity_;
  uint64_t bytes_ = 0;
  std::map<Key, Slot> slots_;
  std::list<Key> lru_;  // front = most recent
};

}  // namespace kvstream::stream
