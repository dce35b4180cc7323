// ChunkCache; see chunk_cache.h.
#include "stream/chunk_cache.h"

namespace kvstream::stream {

std::shared_ptr<const EncodedChunk> ChunkCache::Get(const std::string& context, int chunk, Level level) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(Key{context, chunk, level});
  if (it == slots_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.entry;
}

void ChunkCache::Put(const std::string& context, int chunk, Level level, std::shared_ptr<const EncodedChunk> entry) {
  if (!entry || entry->bytes.size() > capacity_) return;
  std::lock_guard lock(mu_);
  Key key{context, chunk, level};
  if (auto it = slots_.find(key); it != slots_.end()) {
    bytes_ -= it->second.entry->bytes.size();
    lru_.erase(it->second.lru);
    slots_.erase(it);
  }
  bytes_ += entry->bytes.size();
  lru_.push_front(key);
  slots_.emplace(std::move(key), Slot{std::move(entry), lru_.begin()});
  EvictLocked();
}

void ChunkCache::EvictLocked() {
  while (bytes_ > capacity_ && !lru_.empty()) {
    auto it = slots_.find(lru_.back());
    bytes_ -= it->second.entry->bytes.size();
    slots_.erase(it);
    lru_.pop_back();
  }
}

void ChunkCache::EraseContext(const std::string& context) {
  std::lock_guard lock(mu_);
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (std::get<0>(it->first) == context) {
      bytes_ -= it->second.entry->bytes.size();
      lru_.erase(it->second.lru);
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
}

uint64_t ChunkCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace kvstream::stream
