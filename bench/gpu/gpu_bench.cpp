// RunGpuBench (gpu_bench.h).
#include "bench/gpu/gpu_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "bench/gpu/gpu_chunk_set.h"
#include "codec/common/profile_data.h"
#include "kvstream/codec.h"
#include "kvstream/cuda.h"

namespace kvstream::bench {
namespace {

Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status::Internal(std::string("bench gpu: ") + what + ": " + cudaGetErrorString(e));
}

// A device allocation for the benchmark's lifetime.
struct DeviceBytes {
  void* p = nullptr;
  size_t size = 0;
  DeviceBytes() = default;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes(DeviceBytes&& o) noexcept : p(o.p), size(o.size) { o.p = nullptr; }
  ~DeviceBytes() {
    if (p) cudaFree(p);
  }
  Status Allocate(size_t n) {
    size = n;
    return Cuda(cudaMalloc(&p, n), "cudaMalloc");
  }
};

// Seconds between two events recorded around `work` on the stream, the median of `repetitions` runs.
template <typename Work>
Result<double> MedianSeconds(cudaStream_t stream, int repetitions, Work work) {
  cudaEvent_t start, stop;
  KVSTREAM_RETURN_IF_ERROR(Cuda(cudaEventCreate(&start), "cudaEventCreate"));
  KVSTREAM_RETURN_IF_ERROR(Cuda(cudaEventCreate(&stop), "cudaEventCreate"));
  std::vector<double> times;
  Status status;
  for (int r = 0; r < repetitions && status.ok(); ++r) {
    cudaEventRecord(start, stream);
    status = work();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  KVSTREAM_RETURN_IF_ERROR(status);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Row {
  std::string scheme, level;
  size_t chunks = 0;
  int64_t tokens = 0;
  double single_gbps = 0, decode_gbps = 0, memcpy_gbps = 0;
  int batch = 0;
  bool bit_identical = false;
};

Result<Row> BenchSet(const GpuChunkSet& set, const DeviceProfile* device_profile,
                     const GpuBenchOptions& options, cudaStream_t stream) {
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, InspectChunk(set.chunks[0].data(), set.chunks[0].size()));
  const int64_t L = info.layers, T = set.tokens, C = info.channels;
  const size_t plane = static_cast<size_t>(L * T * C) * sizeof(uint16_t), output = 2 * plane;
  Row row;
  row.scheme = set.scheme;
  row.level = set.level;
  row.chunks = set.chunks.size();
  row.tokens = T;
  row.batch = options.batch > 0 ? options.batch : static_cast<int>(std::clamp<size_t>((size_t{1} << 30) / output, 1, 64));
  // The chunks in device memory, once.
  std::vector<DeviceBytes> chunk_memory(set.chunks.size());
  std::vector<GpuChunk> chunks;
  for (size_t i = 0; i < set.chunks.size(); ++i) {
    KVSTREAM_RETURN_IF_ERROR(chunk_memory[i].Allocate(set.chunks[i].size()));
    KVSTREAM_RETURN_IF_ERROR(Cuda(cudaMemcpy(chunk_memory[i].p, set.chunks[i].data(), set.chunks[i].size(),
                                             cudaMemcpyHostToDevice), "cudaMemcpy"));
    chunks.push_back({static_cast<const uint8_t*>(chunk_memory[i].p), set.chunks[i].size(), set.chunks[i].data(),
                      set.chunks[i].size()});
  }
  // Distinct destinations (contiguous fp16 keys then values) and a decoder for each context of the batch.
  std::vector<DeviceBytes> outputs(static_cast<size_t>(row.batch));
  std::vector<KvDestination> destinations;
  std::vector<GpuDecoder> decoders;
  for (DeviceBytes& out : outputs) {
    KVSTREAM_RETURN_IF_ERROR(out.Allocate(output));
    auto* base = static_cast<uint16_t*>(out.p);
    TensorView k = TensorView::Dense(base, DType::kF16, L, T, C), v = TensorView::Dense(base + plane / 2, DType::kF16, L, T, C);
    k.device = v.device = Device::kCuda;
    KVSTREAM_ASSIGN_OR_RETURN(KvDestination d, KvDestination::Contiguous(k, v, 1));
    destinations.push_back(std::move(d));
    KVSTREAM_ASSIGN_OR_RETURN(GpuDecoder decoder, GpuDecoder::Create());
    decoders.push_back(std::move(decoder));
  }
  const DeviceProfile* p = info.profile_hash ? device_profile : nullptr;
  // Correctness first (and the warm-up): the decoded bytes against the CPU decoder's hash.
  KVSTREAM_RETURN_IF_ERROR(decoders[0].Decode(chunks, p, destinations[0], stream));
  KVSTREAM_RETURN_IF_ERROR(decoders[0].Finish());
  std::vector<uint8_t> back(output);
  KVSTREAM_RETURN_IF_ERROR(Cuda(cudaMemcpy(back.data(), outputs[0].p, output, cudaMemcpyDeviceToHost), "cudaMemcpy"));
  row.bit_identical = ProfileHash(back.data(), back.size()) == set.hash;
  const double bytes = static_cast<double>(output);
  KVSTREAM_ASSIGN_OR_RETURN(double single, MedianSeconds(stream, options.repetitions, [&]() -> Status {
    KVSTREAM_RETURN_IF_ERROR(decoders[0].Decode(chunks, p, destinations[0], stream));
    return decoders[0].Finish();
  }));
  row.single_gbps = bytes / single / 1e9;
  KVSTREAM_ASSIGN_OR_RETURN(double batch, MedianSeconds(stream, options.repetitions, [&]() -> Status {
    for (size_t b = 0; b < decoders.size(); ++b) KVSTREAM_RETURN_IF_ERROR(decoders[b].Decode(chunks, p, destinations[b], stream));
    for (GpuDecoder& d : decoders) KVSTREAM_RETURN_IF_ERROR(d.Finish());
    return Status::Ok();
  }));
  row.decode_gbps = bytes * row.batch / batch / 1e9;
  // The memory ceiling: the same output size copied device to device, as many times.
  KVSTREAM_ASSIGN_OR_RETURN(double copy, MedianSeconds(stream, options.repetitions, [&]() -> Status {
    for (size_t b = 0; b < outputs.size(); ++b) {
      KVSTREAM_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(outputs[b].p, outputs[(b + 1) % outputs.size()].p, output,
                                                    cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync"));
    }
    return Status::Ok();
  }));
  row.memcpy_gbps = bytes * row.batch / copy / 1e9;
  return row;
}

}  // namespace

Status RunGpuBench(const GpuBenchOptions& options, const std::string& command) {
  std::string why;
  if (!GpuAvailable(&why)) return Status::Unsupported("bench gpu: " + why);
  KVSTREAM_ASSIGN_OR_RETURN(GpuChunkFolder folder, ReadGpuChunkFolder(options.chunks_dir));
  std::optional<Profile> profile;
  std::optional<DeviceProfile> device_profile;
  if (!folder.profile_bytes.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(Profile parsed, Profile::Parse(folder.profile_bytes.data(), folder.profile_bytes.size()));
    profile.emplace(std::move(parsed));
    KVSTREAM_ASSIGN_OR_RETURN(DeviceProfile uploaded, DeviceProfile::Upload(*profile));
    device_profile.emplace(std::move(uploaded));
  }
  cudaDeviceProp prop{};
  KVSTREAM_RETURN_IF_ERROR(Cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"));
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  if (options.json) {
    std::printf("{\"header\": true, \"date\": \"%s\", \"command\": \"%s\", \"gpu\": \"%s\", \"sm\": \"%d%d\", "
                "\"multiprocessors\": %d, \"memory_mib\": %zu}\n",
                date, command.c_str(), prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                static_cast<size_t>(prop.totalGlobalMem >> 20));
  } else {
    std::printf("# %s  %s\n# %s (sm_%d%d, %d SMs, %zu MiB)\n", date, command.c_str(), prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, static_cast<size_t>(prop.totalGlobalMem >> 20));
    std::printf("%-16s %-6s %6s %6s %12s %6s %12s %12s %8s %s\n", "scheme", "level", "chunks", "tokens", "1 ctx GB/s",
                "batch", "batch GB/s", "memcpy GB/s", "/memcpy", "bit-identical");
  }
  cudaStream_t stream;
  KVSTREAM_RETURN_IF_ERROR(Cuda(cudaStreamCreate(&stream), "cudaStreamCreate"));
  Status status;
  for (const GpuChunkSet& set : folder.sets) {
    auto row = BenchSet(set, device_profile ? &*device_profile : nullptr, options, stream);
    if (!row.ok()) {
      status = row.status().WithContext("chunk set " + set.name);
      break;
    }
    const Row& r = row.value();
    const double ratio = r.decode_gbps / r.memcpy_gbps;
    if (options.json) {
      std::printf("{\"scheme\": \"%s\", \"level\": \"%s\", \"chunks\": %zu, \"tokens\": %lld, \"single_context_gbps\": %.2f, "
                  "\"batch_contexts\": %d, \"decode_gbps\": %.2f, \"memcpy_gbps\": %.2f, \"ratio_to_memcpy\": %.4f, "
                  "\"bit_identical\": %s}\n",
                  r.scheme.c_str(), r.level.c_str(), r.chunks, static_cast<long long>(r.tokens), r.single_gbps, r.batch,
                  r.decode_gbps, r.memcpy_gbps, ratio, r.bit_identical ? "true" : "false");
    } else {
      std::printf("%-16s %-6s %6zu %6lld %12.2f %6d %12.2f %12.2f %8.3f %s\n", r.scheme.c_str(), r.level.c_str(), r.chunks,
                  static_cast<long long>(r.tokens), r.single_gbps, r.batch, r.decode_gbps, r.memcpy_gbps, ratio,
                  r.bit_identical ? "yes" : "NO");
    }
    if (!r.bit_identical) status = Status::Internal("bench gpu: chunk set " + set.name + " differs from the CPU decoder");
  }
  cudaStreamDestroy(stream);
  return status;
}

}  // namespace kvstream::bench
