// kvstream/stream.h — serving and fetching a context's KV cache, chunk by chunk.
//
// A Sender (prefill node) serves registered contexts: each chunk of a context is encoded at the levels it
// offers (ahead of time while a bounded cache has room, on demand after) and sent over the data plane to
// whichever receiver asks. A Receiver (decode node) fetches a context into destination views before a
// deadline: a LevelPolicy chooses each chunk's level, chunk i+1 is on the wire while chunk i is decoded,
// every payload is checked against its CRC32C (a bad one is re-requested once), and "text" chunks are
// recomputed by the receiver's TextRecomputer. Before the first chunk the policy gets the control
// connection's TCP_INFO as a LinkPrior. A Receiver also fetches into a KvDestination (any layout of
// kvstream/kv_destination.h) in host memory, decoded by CPU threads, or in GPU memory, through the
// device pipeline (kvstream/device_pipeline.h): payloads land in pinned staging, the GPU decodes chunk i
// while chunk i+1 is on the wire. docs/transport.md describes the session; docs/protocol.md the messages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/cuda.h"
#include "kvstream/kv_destination.h"
#include "kvstream/level_policy.h"
#include "kvstream/profile.h"
#include "kvstream/status.h"
#include "kvstream/tensor.h"
#include "kvstream/text_recomputer.h"
#include "kvstream/transport.h"

namespace kvstream {

// A context to serve: its KV ([layers][tokens][channels] host views, any dtype and strides) and its
// token ids (needed for the "text" level; may be empty when text is not offered). The views must stay
// valid while the context is registered; `owner`, if set, is held for that long.
struct ContextSpec {
  TensorView keys;
  TensorView values;
  std::vector<int32_t> token_ids;
  // Per token, how much attention it received in the prefill (KvCache::Importance): what the sender's
  // fine rows rank tokens by. Empty: no fine rows for this context.
  std::vector<float> importance;
  std::shared_ptr<const void> owner;
};

struct SenderOptions {
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;  // 0 picks a free port; see Sender::port()
  ControlOptions control;   // model_hash / profile_hash are what receivers must match
  DataPlaneOptions data;
  int chunk_tokens = 256;   // tokens per chunk (the last chunk of a context may be shorter)
  // Levels offered for every context, in manifest order. Empty (default): fp16, int8, every lossy level
  // of the profile's ladder (of DefaultLadder(layers) without a profile), and text when token ids exist.
  std::vector<Level> levels;
  // Codec profile chunks are encoded with; null: every lossy chunk carries its own tables.
  std::shared_ptr<const Profile> profile;
  // Quantiser of the lossy levels: kChannelUniform (default), kTransform (smaller, slower to decode; needs
  // a profile learned with a transform) or kPredicted (smaller still, slower again; needs a profile learned
  // with a prediction). The manifest advertises the scheme's measured quality.
  QuantScheme scheme = QuantScheme::kChannelUniform;
  // Transform and predicted levels code this fraction of each context's tokens, those that received the
  // most attention (ContextSpec::importance), at fine_level (EncodeOptions::fine_min_importance): smaller
  // at equal quality (lab/rate-distortion.md, "Fine rows"). 0: none.
  double fine_fraction = 0.0;
  Level fine_level = 2;
  // Encoded chunks kept in memory across all contexts; the rest are re-encoded when asked for.
  uint64_t cache_bytes = uint64_t{512} << 20;
  int encode_threads = 1;                 // threads encoding chunks on demand
  int max_inflight_per_connection = 16;   // chunk requests a receiver may have outstanding
  int max_connections = 256;
};

// Thread-safe. Destruction stops serving: connections close and pending sends fail.
class Sender {
 public:
  static Result<std::unique_ptr<Sender>> Start(SenderOptions options);
  ~Sender();

  // Registers a context under `id` (at most 256 bytes). Encodes every chunk at every offered level once,
  // to know the sizes the manifest advertises, keeping what fits in the cache.
  Status Register(const std::string& id, ContextSpec spec);
  Status Unregister(const std::string& id);
  int port() const;

  struct Stats {
    int connections = 0;
    uint64_t chunks_sent = 0;
    uint64_t bytes_sent = 0;
    uint64_t cache_bytes = 0;      // encoded bytes held now
    uint64_t encodes = 0;          // chunk encodings performed (registration included)
    uint64_t sends_pending = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  friend struct SenderTestPeer;  // the tests' fault injection (stream/testing/), outside the public API
  explicit Sender(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct ReceiverOptions {
  ControlOptions control;   // model_hash / profile_hash announced (0: accept any)
  DataPlaneOptions data;
  // A data plane shared with other receivers of this process; null: the receiver creates its own.
  std::shared_ptr<DataPlane> data_plane;
  // Chunks requested ahead of the one being decoded. 1 disables pipelining: each chunk is requested only
  // after the previous one is decoded.
  int max_inflight_chunks = 2;
  // Threads decoding arrived chunks: several chunks at once, and a thread with no chunk of its own helps
  // with the parts (segments, blocks of positions) of one being decoded, so the last chunks use them all.
  int decode_threads = 1;
  // A requested chunk that has not arrived after this long fails the fetch with kTimeout.
  int chunk_timeout_ms = 10000;
  // Largest chunk accepted (manifest sizes above it fail the fetch before anything is allocated).
  uint64_t max_chunk_bytes = uint64_t{256} << 20;
  // Needed to decode lossy chunks encoded against a profile.
  std::shared_ptr<const Profile> profile;
  // Recomputes "text" chunks (e.g. MakeTextRecomputer of kvstream/model.h); without one a policy choosing
  // text fails the fetch. Set control.model_hash (ModelHash) to have the sender check the model.
  std::shared_ptr<TextRecomputer> text_recomputer;
  // Fetches into GPU memory (a KvDestination on Device::kCuda): the CUDA stream the decodes are enqueued
  // on (the engine's, so that its later work is ordered after them; null: the default stream), and the
  // device pipeline's ring of pinned staging slots, each as large as the context's largest chunk. The
  // device (its profile upload, slots and decoders) is kept across fetches.
  CudaStream cuda_stream = nullptr;
  int device_ring_slots = 4;
};

struct FetchResult {
  bool complete = false;          // true only when every chunk is in the destination
  std::string context_id;
  FetchManifest manifest;
  std::vector<ChunkTelemetry> chunks;  // in chunk order
  uint64_t bytes = 0;             // payload bytes received (retries included)
  int retries = 0;                // chunks re-requested after a CRC failure
  double kv_ready_s = 0;          // from the start of Fetch to the last chunk written
  // What set kv_ready_s: when the last payload byte arrived, and the decode (and recompute) time of all
  // chunks together. Ready soon after the last byte, the link set the time; long after it, the decoders.
  double last_byte_s = 0;
  double decode_s = 0;
  LinkPrior link_prior;           // what the policy was told of the link before the first chunk
  bool deadline_met = false;
  // Where the payloads went: "host" (host memory, decoded by CPU threads), "staging" (pinned host
  // memory, copied to the GPU and decoded there), "ucx-cuda" (straight into device memory registered
  // with UCX). `device`: the GPU decoding them ("cpu" on the host path).
  std::string path = "host";
  std::string device = "cpu";
};

// One control connection to a Sender. Fetch and GetManifest may be called from any thread, one at a time
// (they serialise). A failed fetch leaves the destination partly written.
class Receiver {
 public:
  static Result<std::unique_ptr<Receiver>> Connect(const std::string& host, int port, ReceiverOptions options);
  ~Receiver();

  Result<ManifestReply> GetManifest(const std::string& context_id);
  // Fetches every chunk of `context_id` into keys/values ([layers][>= total tokens][channels] host
  // views). `deadline_s` is handed to the policy (the fetch itself is bounded by chunk_timeout_ms).
  Result<FetchResult> Fetch(const std::string& context_id, const TensorView& keys, const TensorView& values,
                            double deadline_s, LevelPolicy& policy);
  // Fetches into a destination in any layout, holding every position of the context: in host memory
  // (decoded by CPU threads) or in CUDA memory (the device pipeline, on options.cuda_stream; kUnsupported
  // in a build or on a machine without CUDA). When it returns, every chunk is in the destination, and
  // work enqueued on cuda_stream afterwards sees it. "text" chunks need host views (the other Fetch).
  Result<FetchResult> Fetch(const std::string& context_id, const KvDestination& destination, double deadline_s,
                            LevelPolicy& policy);

  struct Impl;

 private:
  friend struct ReceiverTestPeer;  // the tests' host stand-in for the GPU (stream/testing/)
  explicit Receiver(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvstream
