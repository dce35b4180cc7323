// RunPipelineBench (pipeline_bench.h).
#include "bench/gpu/pipeline_bench.h"

#if KVSTREAM_HAS_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "bench/gpu/gpu_chunk_set.h"
#include "codec/common/crc32c.h"
#include "codec/common/profile_data.h"
#include "cuda/pipeline_device.h"
#include "kvstream/codec.h"
#include "kvstream/cuda.h"
#include "kvstream/device_pipeline.h"

namespace kvstream::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start, Clock::time_point t) { return std::chrono::duration<double>(t - start).count(); }

// What one delivery carries: layers [layer_begin, layer_end) of a chunk, `bytes` of it on the wire (its
// segments; the first part of a chunk also its header).
struct Part {
  size_t chunk;
  int64_t layer_begin, layer_end;
  uint64_t offset, bytes;  // within the chunk
};

// The paced link: part i's last byte arrives when the bytes of parts 0..i have crossed it.
std::vector<Clock::duration> Arrivals(const std::vector<Part>& parts, double gbps) {
  std::vector<Clock::duration> at;
  double bits = 0;
  for (const Part& p : parts) {
    bits += 8.0 * static_cast<double>(p.bytes);
    at.push_back(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(bits / (gbps * 1e9))));
  }
  return at;
}

// The default order: every chunk whole, in order. Layer-major: the context's layers in `groups` groups,
// group g of every chunk before group g + 1 of any; a chunk's groups are consecutive byte ranges of it
// (its segments are in layer order), the first one with the chunk's header.
Result<std::vector<Part>> SendOrder(const GpuChunkSet& set, bool layer_major, int groups) {
  std::vector<Part> parts;
  std::vector<ChunkInfo> infos;
  for (const auto& c : set.chunks) {
    KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, InspectChunk(c.data(), c.size()));
    infos.push_back(std::move(info));
  }
  if (!layer_major) {
    for (size_t c = 0; c < infos.size(); ++c) parts.push_back({c, 0, infos[c].layers, 0, set.chunks[c].size()});
    return parts;
  }
  for (int g = 0; g < groups; ++g) {
    for (size_t c = 0; c < infos.size(); ++c) {
      const ChunkInfo& info = infos[c];
      const int64_t begin = info.layers * g / groups, end = info.layers * (g + 1) / groups;
      if (begin == end) continue;
      const uint64_t from = g == 0 ? 0 : info.segments[static_cast<size_t>(2 * begin)].offset;
      const SegmentInfo& last = info.segments[static_cast<size_t>(2 * end - 1)];
      parts.push_back({c, begin, end, from, last.offset + last.size - from});
    }
  }
  return parts;
}

struct Measured {
  double kv_ready_s = 0, first_layer_s = 0, last_byte_s = 0, decode_s = 0;
  bool bit_identical = false;
};

struct SetShape {
  int64_t layers = 0, tokens = 0, channels = 0;
  size_t plane_bytes() const { return static_cast<size_t>(layers * tokens * channels) * sizeof(uint16_t); }
};

Result<SetShape> ShapeOf(const GpuChunkSet& set) {
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, InspectChunk(set.chunks[0].data(), set.chunks[0].size()));
  return SetShape{info.layers, set.tokens, info.channels};
}

// Today's host path: arrived parts decoded by `threads` CPU threads into host memory (the parts of one
// chunk one after the other). First layer: when layer 0 of every chunk is in the destination.
Result<Measured> RunCpu(const GpuChunkSet& set, const Profile* profile, double gbps, int threads,
                        const std::vector<Part>& parts) {
  KVSTREAM_ASSIGN_OR_RETURN(SetShape s, ShapeOf(set));
  std::vector<uint16_t> kv(s.plane_bytes() / sizeof(uint16_t) * 2);  // keys, then values
  KVSTREAM_ASSIGN_OR_RETURN(
      KvDestination d,
      KvDestination::Contiguous(TensorView::Dense(kv.data(), DType::kF16, s.layers, s.tokens, s.channels),
                                TensorView::Dense(kv.data() + kv.size() / 2, DType::kF16, s.layers, s.tokens, s.channels), 1));
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> arrived;  // parts, in arrival order
  std::vector<bool> decoding(set.chunks.size(), false);
  size_t chunks_with_layer0 = 0;
  bool done_arriving = false;
  Status failure;
  Measured m;
  const auto start = Clock::now();
  Clock::time_point last_done = start;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (true) {
        size_t i;
        {
          std::unique_lock lock(mu);
          const auto runnable = [&] {
            return std::find_if(arrived.begin(), arrived.end(), [&](size_t p) { return !decoding[parts[p].chunk]; });
          };
          cv.wait(lock, [&] { return runnable() != arrived.end() || (done_arriving && arrived.empty()); });
          if (arrived.empty()) return;
          const auto it = runnable();
          i = *it;
          arrived.erase(it);
          decoding[parts[i].chunk] = true;
        }
        const Part& p = parts[i];
        DecodeOptions options;
        options.profile = profile;
        options.layer_begin = p.layer_begin;
        options.layer_end = p.layer_end;
        const auto begin = Clock::now();
        Status st = DecodeChunkInto(set.chunks[p.chunk].data(), set.chunks[p.chunk].size(), options, d);
        const auto end = Clock::now();
        {
          std::lock_guard lock(mu);
          decoding[p.chunk] = false;
          m.decode_s += std::chrono::duration<double>(end - begin).count();
          last_done = std::max(last_done, end);
          if (p.layer_begin == 0 && ++chunks_with_layer0 == set.chunks.size()) m.first_layer_s = Since(start, end);
          if (!st.ok() && failure.ok()) failure = st;
        }
        cv.notify_all();
      }
    });
  }
  const auto arrivals = Arrivals(parts, gbps);
  for (size_t i = 0; i < parts.size(); ++i) {
    std::this_thread::sleep_until(start + arrivals[i]);
    m.last_byte_s = Since(start, std::max(Clock::now(), start + arrivals[i]));  // before any decode of it can end
    {
      std::lock_guard lock(mu);
      arrived.push_back(i);
    }
    cv.notify_all();
  }
  {
    std::lock_guard lock(mu);
    done_arriving = true;
  }
  cv.notify_all();
  for (std::thread& t : pool) t.join();
  KVSTREAM_RETURN_IF_ERROR(failure);
  m.kv_ready_s = Since(start, last_done);
  m.bit_identical = ProfileHash(reinterpret_cast<const uint8_t*>(kv.data()), kv.size() * sizeof(uint16_t)) == set.hash;
  return m;
}

#if KVSTREAM_HAS_CUDA
Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status::Internal(std::string("bench pipeline: ") + what + ": " + cudaGetErrorString(e));
}

// The device pipeline: each part copied into its chunk's pinned ring slot while it is "on the wire",
// submitted when its last byte has arrived (the CRC check, the copy to the GPU and the decode follow on
// the stream). Layer-major parts hold a slot per chunk from its first part on: the ring has one per chunk.
Result<Measured> RunCuda(const GpuChunkSet& set, std::shared_ptr<cuda::PipelineDevice> device, double gbps,
                         int ring_slots, cudaStream_t stream, const std::vector<Part>& parts) {
  KVSTREAM_ASSIGN_OR_RETURN(SetShape s, ShapeOf(set));
  const size_t output = 2 * s.plane_bytes();
  int ordinal = 0;
  KVSTREAM_RETURN_IF_ERROR(Cuda(cudaGetDevice(&ordinal), "cudaGetDevice"));  // the pipeline device's
  KVSTREAM_ASSIGN_OR_RETURN(const DeviceKv kv, DeviceKv::Allocate(s.layers, s.tokens, s.channels, ordinal));
  const KvDestination& d = kv.destination;
  const bool layer_major = parts.size() > set.chunks.size();
  DevicePipelineOptions po;
  po.ring_slots = layer_major ? std::max<int>(ring_slots, static_cast<int>(set.chunks.size())) : ring_slots;
  po.wait_timeout_ms = 60000;
  po.max_chunk_bytes = 1;
  for (const auto& c : set.chunks) po.max_chunk_bytes = std::max<uint64_t>(po.max_chunk_bytes, c.size());
  std::vector<uint32_t> crcs;
  for (const Part& p : parts) crcs.push_back(codec::Crc32c(set.chunks[p.chunk].data() + p.offset, p.bytes));
  Measured m;
  std::mutex mu;
  Clock::time_point last_done;
  Status failure;
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<DevicePipeline> pipeline,
                            DevicePipeline::Create(po, std::move(device), d, static_cast<int>(set.chunks.size()),
                                                   [&](int, const Status& st, double decode_s) {
                                                     std::lock_guard lock(mu);
                                                     last_done = std::max(last_done, Clock::now());
                                                     m.decode_s += decode_s;
                                                     if (!st.ok() && failure.ok()) failure = st;
                                                   }));
  const auto start = Clock::now();
  last_done = start;
  // Layer 0 of every chunk: a watcher, so that the source never waits for the device.
  Status layer0;
  std::thread watcher([&] {
    layer0 = pipeline->WaitLayer(0);
    m.first_layer_s = Since(start, Clock::now());
  });
  const auto arrivals = Arrivals(parts, gbps);
  std::vector<DevicePipeline::Slot> slots(set.chunks.size());
  Status sent;
  for (size_t i = 0; i < parts.size() && sent.ok(); ++i) {
    const Part& p = parts[i];
    if (p.layer_begin == 0) {
      auto slot = pipeline->Acquire();
      if (!slot.ok()) {
        sent = slot.status();
        break;
      }
      slots[p.chunk] = *slot;
    }
    std::memcpy(slots[p.chunk].data + p.offset, set.chunks[p.chunk].data() + p.offset, p.bytes);
    std::this_thread::sleep_until(start + arrivals[i]);
    m.last_byte_s = Since(start, std::max(Clock::now(), start + arrivals[i]));
    sent = pipeline->SubmitPart(slots[p.chunk], static_cast<int>(p.chunk), set.chunks[p.chunk].size(), p.offset, p.bytes,
                                crcs[i], p.layer_begin, p.layer_end);
  }
  const Status finished = pipeline->Finish();
  watcher.join();
  KVSTREAM_RETURN_IF_ERROR(sent);
  KVSTREAM_RETURN_IF_ERROR(finished);
  KVSTREAM_RETURN_IF_ERROR(layer0);
  {
    std::lock_guard lock(mu);
    KVSTREAM_RETURN_IF_ERROR(failure);
    m.kv_ready_s = Since(start, last_done);
  }
  pipeline.reset();
  std::vector<uint8_t> back(output);
  KVSTREAM_RETURN_IF_ERROR(CopyDeviceToHost(back.data(), kv.memory.get(), output));
  m.bit_identical = ProfileHash(back.data(), back.size()) == set.hash;
  return m;
}
#endif

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

}  // namespace

Status RunPipelineBench(const PipelineBenchOptions& options, const std::string& command) {
  if (options.devices.empty() || options.link_gbps.empty()) return Status::InvalidArgument("bench pipeline: no device or no rate");
  for (double g : options.link_gbps) {
    if (!(g > 0 && g <= 10000)) return Status::InvalidArgument("bench pipeline: a link rate outside (0, 10000] Gbit/s");
  }
  if (options.cpu_threads < 1 || options.ring_slots < 1 || options.repetitions < 1 || options.layer_groups < 1) {
    return Status::InvalidArgument("bench pipeline: threads, ring slots, repetitions and layer groups must be positive");
  }
  for (const std::string& order : options.orders) {
    if (order != "default" && order != "layer-major") {
      return Status::InvalidArgument("bench pipeline: order '" + order + "', expected default or layer-major");
    }
  }
  std::string gpu = "none";
  for (const std::string& device : options.devices) {
    if (device != "cuda" && device != "cpu") return Status::InvalidArgument("bench pipeline: device '" + device + "', expected cuda or cpu");
  }
  KVSTREAM_ASSIGN_OR_RETURN(GpuChunkFolder folder, ReadGpuChunkFolder(options.chunks_dir));
  std::shared_ptr<const Profile> profile;
  if (!folder.profile_bytes.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(Profile parsed, Profile::Parse(folder.profile_bytes.data(), folder.profile_bytes.size()));
    profile = std::make_shared<const Profile>(std::move(parsed));
  }
  std::shared_ptr<cuda::PipelineDevice> device;
#if KVSTREAM_HAS_CUDA
  cudaStream_t stream = nullptr;
#endif
  if (std::find(options.devices.begin(), options.devices.end(), "cuda") != options.devices.end()) {
    std::string why;
    if (!GpuAvailable(&why)) return Status::Unsupported("bench pipeline --device cuda: " + why);
#if KVSTREAM_HAS_CUDA
    KVSTREAM_RETURN_IF_ERROR(Cuda(cudaStreamCreate(&stream), "cudaStreamCreate"));
    KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<cuda::PipelineDevice> made,
                              cuda::MakeCudaPipelineDevice(profile, stream, DecodeLimits{}));
    device = std::move(made);
    gpu = device->name();
#else
    return Status::Unsupported("bench pipeline --device cuda: this build has no CUDA");
#endif
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const unsigned cores = std::thread::hardware_concurrency();
  if (options.json) {
    std::printf("{\"header\": true, \"date\": \"%s\", \"command\": \"%s\", \"cpu\": \"%s\", \"cores\": %u, \"gpu\": \"%s\", "
                "\"cpu_threads\": %d, \"ring_slots\": %d, \"repetitions\": %d, \"layer_groups\": %d}\n",
                date, command.c_str(), CpuModel().c_str(), cores, gpu.c_str(), options.cpu_threads, options.ring_slots,
                options.repetitions, options.layer_groups);
  } else {
    std::printf("# %s  %s\n# CPU: %s (%u cores), cpu rows on %d decode threads; GPU: %s, ring of %d slots\n", date,
                command.c_str(), CpuModel().c_str(), cores, options.cpu_threads, gpu.c_str(), options.ring_slots);
    std::printf("# median of %d runs; orders: default (every chunk whole: layer 0 ready with the KV) and layer-major\n"
                "# (%d layer groups, group g of every chunk before group g+1)\n",
                options.repetitions, options.layer_groups);
    std::printf("%-6s %-8s %-11s %-28s %6s %9s %6s %10s %10s %12s %10s %7s %8s %s\n", "device", "path", "order", "method",
                "tokens", "MiB", "Gbit/s", "KV ms", "layer 0 ms", "last byte ms", "decode ms", "tail %", "vs int8",
                "bit-identical");
  }
  Status status;
  for (const std::string& dev : options.devices) {
    for (const std::string& order : options.orders) {
      for (double gbps : options.link_gbps) {
        std::map<int64_t, double> int8_ready;  // per token count: int8's KV-ready, for the ratio column
        for (int pass = 0; pass < 2; ++pass) {  // int8 first, so that every row can be compared with it
          for (const GpuChunkSet& set : folder.sets) {
            if ((set.level == "int8") != (pass == 0)) continue;
            KVSTREAM_ASSIGN_OR_RETURN(const std::vector<Part> parts,
                                      SendOrder(set, order == "layer-major", options.layer_groups));
            std::vector<Measured> runs;
            for (int r = -1; r < options.repetitions; ++r) {  // run -1 warms up (threads, pages, the GPU's caches)
              Result<Measured> m = Status::Unsupported("no device");
              if (dev == "cpu") m = RunCpu(set, profile.get(), gbps, options.cpu_threads, parts);
#if KVSTREAM_HAS_CUDA
              if (dev == "cuda") m = RunCuda(set, device, gbps, options.ring_slots, stream, parts);
#endif
              if (!m.ok()) return m.status().WithContext("bench pipeline: " + dev + " " + set.name);
              if (r >= 0) runs.push_back(*m);
            }
            std::sort(runs.begin(), runs.end(), [](const Measured& a, const Measured& b) { return a.kv_ready_s < b.kv_ready_s; });
            const Measured& m = runs[runs.size() / 2];
            bool identical = true;
            for (const Measured& r : runs) identical = identical && r.bit_identical;
            if (set.level == "int8") int8_ready[set.tokens] = m.kv_ready_s;
            const auto base = int8_ready.find(set.tokens);
            const double vs_int8 = base == int8_ready.end() ? 0 : base->second / m.kv_ready_s;
            uint64_t bytes = 0;
            for (const auto& c : set.chunks) bytes += c.size();
            const double tail = m.kv_ready_s > 0 ? 100.0 * (m.kv_ready_s - m.last_byte_s) / m.kv_ready_s : 0;
            const char* path = dev == "cuda" ? "staging" : "host";
            if (options.json) {
              std::printf("{\"method\": \"%s\", \"scheme\": \"%s\", \"level\": \"%s\", \"device\": \"%s\", \"path\": \"%s\", "
                          "\"order\": \"%s\", \"tokens\": %lld, \"bytes\": %llu, \"link_gbps\": %g, \"kv_ready_ms\": %.3f, "
                          "\"first_layer_ms\": %.3f, \"decode_ms\": %.3f, \"last_byte_ms\": %.3f, \"kv_ready_vs_int8\": %.3f, "
                          "\"bit_identical\": %s}\n",
                          set.name.c_str(), set.scheme.c_str(), set.level.c_str(), dev.c_str(), path, order.c_str(),
                          static_cast<long long>(set.tokens), static_cast<unsigned long long>(bytes), gbps,
                          m.kv_ready_s * 1e3, m.first_layer_s * 1e3, m.decode_s * 1e3, m.last_byte_s * 1e3, vs_int8,
                          identical ? "true" : "false");
            } else {
              std::printf("%-6s %-8s %-11s %-28s %6lld %9.2f %6g %10.2f %10.2f %12.2f %10.2f %7.1f %8.2f %s\n", dev.c_str(),
                          path, order.c_str(), set.name.c_str(), static_cast<long long>(set.tokens),
                          static_cast<double>(bytes) / (1 << 20), gbps, m.kv_ready_s * 1e3, m.first_layer_s * 1e3,
                          m.last_byte_s * 1e3, m.decode_s * 1e3, tail, vs_int8, identical ? "yes" : "NO");
            }
            std::fflush(stdout);
            if (!identical) status = Status::Internal("bench pipeline: " + dev + " " + set.name + " differs from the CPU decoder");
          }
        }
      }
    }
  }
#if KVSTREAM_HAS_CUDA
  device.reset();
  if (stream) cudaStreamDestroy(stream);
#endif
  return status;
}

}  // namespace kvstream::bench
