// kvstream_gpu_check [GOLDEN_DIR]: every golden chunk of the current format that the GPU decoder supports,
// decoded on the GPU into every destination layout (contiguous, Hugging Face, paged, paged joined) and
// dtype (fp16, bf16, fp32), compared byte for byte with the CPU decoder's DecodeChunkInto; then all of
// them in one batch; then each through the device pipeline (kvstream/device_pipeline.h: pinned staging,
// the host CRC check, copy, decode and event on a stream) into every layout in fp16. Prints one line per
// case; exit 0 when all match, 1 when one differs or fails, 77 when there is no CUDA device.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <memory>

#include "codec/common/crc32c.h"
#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "kvstream/cuda.h"
#include "kvstream/device_pipeline.h"
#include "kvstream/profile.h"
#include "tests/cuda/layouts.h"

namespace kvstream {
namespace {

template <typename T>
T* DeviceCopy(const T* data, size_t count) {
  void* p = nullptr;
  if (cudaMalloc(&p, count * sizeof(T) + 1) != cudaSuccess) return nullptr;
  cudaMemcpy(p, data, count * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(p);
}

// The same layout with its storage and block table mirrored in device memory.
struct DeviceLayout {
  std::vector<uint8_t*> buffers;
  int32_t* table = nullptr;
  KvDestination destination;
  ~DeviceLayout() {
    for (uint8_t* b : buffers) cudaFree(b);
    if (table) cudaFree(table);
  }
};

void Mirror(const testing::Layout& host, DeviceLayout* d) {
  d->destination = host.destination;
  d->destination.device = Device::kCuda;
  for (const auto& s : host.storage) d->buffers.push_back(DeviceCopy(s.data(), s.size()));
  const auto relocate = [&](void* p) -> void* {
    for (size_t b = 0; b < host.storage.size(); ++b) {
      const auto* base = host.storage[b].data();
      if (p >= base && p < base + host.storage[b].size()) return d->buffers[b] + (static_cast<uint8_t*>(p) - base);
    }
    return nullptr;
  };
  for (void*& p : d->destination.keys) p = relocate(p);
  for (void*& p : d->destination.values) p = relocate(p);
  if (!host.block_table.empty()) {
    d->table = DeviceCopy(host.block_table.data(), host.block_table.size());
    d->destination.block_table = d->table;
  }
}

bool SameAsHost(const DeviceLayout& d, const testing::Layout& reference) {
  for (size_t b = 0; b < reference.storage.size(); ++b) {
    std::vector<uint8_t> back(reference.storage[b].size());
    cudaMemcpy(back.data(), d.buffers[b], back.size(), cudaMemcpyDeviceToHost);
    if (back != reference.storage[b]) return false;
  }
  return true;
}

int Run(const std::string& dir) {
  std::string why;
  if (!GpuAvailable(&why)) {
    std::printf("gpu_check: skipped: %s\n", why.c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("gpu_check: %s (sm_%d%d, %zu MiB)\n", prop.name, prop.major, prop.minor, prop.totalGlobalMem >> 20);
  // The golden profiles, on the host and uploaded.
  std::vector<Profile> profiles;
  std::vector<DeviceProfile> device_profiles;
  for (const char* file : {"uniform.kvpf", "predicted.kvpf"}) {
    const auto bytes = ReadWholeFile(dir + "/" + file);
    auto profile = bytes.ok() ? Profile::Parse(bytes.value().data(), bytes.value().size()) : Result<Profile>(bytes.status());
    auto uploaded = profile.ok() ? DeviceProfile::Upload(profile.value()) : Result<DeviceProfile>(profile.status());
    if (!uploaded.ok()) {
      std::printf("gpu_check: %s: %s\n", file, uploaded.status().ToString().c_str());
      return 1;
    }
    profiles.push_back(std::move(profile).value());
    device_profiles.push_back(std::move(uploaded).value());
  }
  int failures = 0, cases = 0;
  for (const char* name : {"fp16.kvck", "int8.kvck", "uniform_profile_L1.kvck", "uniform_profile_L3.kvck",
                           "uniform_inchunk_L3.kvck", "uniform_inchunk_L6.kvck", "transform_L1.kvck",
                           "transform_L3.kvck", "transform_fine_L4.kvck", "predicted_L1.kvck", "predicted_L3.kvck",
                           "predicted_fine_L4.kvck"}) {
    const auto bytes = ReadWholeFile(dir + "/" + name);
    if (!bytes.ok()) {
      std::printf("FAIL %s: %s\n", name, bytes.status().ToString().c_str());
      ++failures;
      continue;
    }
    const std::vector<uint8_t>& b = bytes.value();
    const ChunkInfo info = InspectChunk(b.data(), b.size()).value();
    const size_t which = info.profile_hash == profiles[0].hash() ? 0 : 1;
    uint8_t* chunk = DeviceCopy(b.data(), b.size());
    for (const char* kind : testing::kLayouts) {
      for (DType dtype : {DType::kF16, DType::kBF16, DType::kF32}) {
        ++cases;
        testing::Layout reference = testing::MakeLayout(kind, dtype, info, testing::HeadsOf(info));
        testing::Layout zero = testing::MakeLayout(kind, dtype, info, testing::HeadsOf(info));
        DecodeOptions options;
        options.profile = &profiles[which];
        Status s = DecodeChunkInto(b.data(), b.size(), options, reference.destination);
        DeviceLayout d;
        Mirror(zero, &d);
        if (s.ok()) {
          s = DecodeChunks({{chunk, b.size(), b.data(), b.size()}}, info.profile_hash ? &device_profiles[which] : nullptr,
                           d.destination, nullptr);
        }
        const bool same = s.ok() && SameAsHost(d, reference);
        failures += same ? 0 : 1;
        std::printf("%s %s %s%s%s\n", same ? "ok  " : "FAIL", name, reference.name.c_str(), s.ok() ? "" : ": ",
                    s.ok() ? "" : s.ToString().c_str());
      }
    }
    cudaFree(chunk);
    // The device pipeline, on a stream of its own, the way a Receiver feeds it.
    cudaStream_t stream = nullptr;
    cudaStreamCreate(&stream);
    auto shared_profile = std::make_shared<const Profile>(profiles[which]);
    for (const char* kind : testing::kLayouts) {
      ++cases;
      testing::Layout reference = testing::MakeLayout(kind, DType::kF16, info, testing::HeadsOf(info));
      testing::Layout zero = testing::MakeLayout(kind, DType::kF16, info, testing::HeadsOf(info));
      DecodeOptions options;
      options.profile = &profiles[which];
      Status s = DecodeChunkInto(b.data(), b.size(), options, reference.destination);
      DeviceLayout d;
      Mirror(zero, &d);
      void* event = nullptr;
      if (s.ok()) {
        DevicePipelineOptions po;
        po.max_chunk_bytes = b.size();
        auto pipeline = DevicePipeline::Create(po, info.profile_hash ? shared_profile : nullptr, stream, d.destination, 1);
        s = pipeline.status();
        if (s.ok()) {
          auto slot = (*pipeline)->Acquire();
          s = slot.status();
          if (s.ok()) {
            std::memcpy(slot->data, b.data(), b.size());
            s = (*pipeline)->Submit(*slot, 0, b.size(), codec::Crc32c(b.data(), b.size()));
          }
          if (s.ok()) s = (*pipeline)->Finish();
          if (s.ok()) event = (*pipeline)->LayerEvent(0);
        }
      }
      const bool same = s.ok() && event != nullptr && SameAsHost(d, reference);
      failures += same ? 0 : 1;
      std::printf("%s %s pipeline/%s%s%s\n", same ? "ok  " : "FAIL", name, reference.name.c_str(), s.ok() ? "" : ": ",
                  s.ok() ? (event ? "" : "(no layer event)") : s.ToString().c_str());
    }
    cudaStreamDestroy(stream);
  }
  std::printf("gpu_check: %d of %d cases bit-identical to the CPU decoder\n", cases - failures, cases);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kvstream

int main(int argc, char** argv) {
  return kvstream::Run(argc > 1 ? argv[1] : std::string(KVSTREAM_GOLDEN_DIR) + "/v7");
}
