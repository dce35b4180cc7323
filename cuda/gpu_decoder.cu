// The GPU decoder (kvstream/cuda.h): device memory, uploads and the five launches of a decode over the
// kernels in cuda/kernels/, whose code the CPU launcher (cuda/testing/) runs too.
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_memory.h"
#include "cuda/decode_plan.h"
#include "cuda/kernels/block_executor.h"
#include "cuda/kernels/entropy_kernel.h"
#include "cuda/kernels/frame_kernel.h"
#include "cuda/kernels/reconstruct_kernel.h"
#include "cuda/kernels/table_kernel.h"
#include "kvstream/cuda.h"

namespace kvstream {
namespace {

using cuda::DeviceBuffer;
using cuda::PinnedBuffer;

// Copies a host array into a device buffer (one byte more, so that an empty array has an address).
template <typename T>
Status UploadArray(DeviceBuffer& buffer, const std::vector<T>& v) {
  KVSTREAM_RETURN_IF_ERROR(buffer.Reserve(v.size() * sizeof(T) + 1));
  KVSTREAM_CUDA(cudaMemcpy(buffer.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return Status::Ok();
}

__global__ void FrameLaunch(cuda::DecodeArgs a) {
  cuda::DeviceBlock x;
  cuda::FrameKernel(x, a);
}
__global__ void TableLaunch(cuda::DecodeArgs a) {
  __shared__ cuda::TableShared shared;
  cuda::DeviceBlock x;
  cuda::TableKernel(x, a, shared);
}
__global__ void EntropyLaunch(cuda::DecodeArgs a) {
  __shared__ cuda::EntropyShared shared;
  cuda::DeviceBlock x;
  cuda::EntropyKernel(x, a, shared);
}
__global__ void EscapeLaunch(cuda::DecodeArgs a) {
  cuda::DeviceBlock x;
  cuda::EscapeScanKernel(x, a);
}
__global__ void ReconstructLaunch(cuda::DecodeArgs a, cuda::TileMap tiles) {
  __shared__ cuda::ReconstructShared shared;
  cuda::DeviceBlock x;
  cuda::ReconstructKernel(x, a, tiles, shared);
}

}  // namespace

bool GpuAvailable(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why) *why = e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
    return false;
  }
  return true;
}

Result<std::shared_ptr<void>> AllocateDeviceMemory(size_t bytes, int ordinal) {
  std::string why;
  if (!GpuAvailable(&why)) return Status::Unsupported("device memory: " + why);
  KVSTREAM_CUDA(cudaSetDevice(ordinal));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    return Status::ResourceExhausted("device memory: " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(ordinal) +
                                     ": " + cudaGetErrorString(e));
  }
  KVSTREAM_CUDA(e);
  std::shared_ptr<void> owned(p, [](void* q) { cudaFree(q); });
  KVSTREAM_CUDA(cudaMemset(p, 0, bytes));
  return owned;
}

Status CopyDeviceToHost(void* host, const void* device, size_t bytes) {
  KVSTREAM_CUDA(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

struct DeviceProfile::Impl {
  Profile profile;
  DeviceBuffer means, steps, slots, channel_table;
  DeviceBuffer transform_means, transform_steps, bases, transform_kept, transform_table;
  DeviceBuffer input_scales, bias, predictor, predictor_scales, residual_bases, prediction_kept, prediction_table;
  cuda::ProfileTables tables;
};

DeviceProfile::DeviceProfile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceProfile::DeviceProfile(DeviceProfile&&) noexcept = default;
DeviceProfile& DeviceProfile::operator=(DeviceProfile&&) noexcept = default;
DeviceProfile::~DeviceProfile() = default;
const Profile& DeviceProfile::profile() const { return impl_->profile; }
size_t DeviceProfile::device_bytes() const {
  const Impl& m = *impl_;
  return m.means.size() + m.steps.size() + m.slots.size() + m.channel_table.size() + m.transform_means.size() +
         m.transform_steps.size() + m.bases.size() + m.transform_kept.size() + m.transform_table.size() +
         m.input_scales.size() + m.bias.size() + m.predictor.size() + m.predictor_scales.size() +
         m.residual_bases.size() + m.prediction_kept.size() + m.prediction_table.size();
}

Result<DeviceProfile> DeviceProfile::Upload(const Profile& profile) {
  KVSTREAM_ASSIGN_OR_RETURN(cuda::ProfileImage image, cuda::MakeProfileImage(profile));
  std::unique_ptr<Impl> impl(new Impl{profile});
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->means, image.means));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->steps, image.steps));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->slots, image.slots));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->channel_table, image.channel_table));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->transform_means, image.transform_means));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->transform_steps, image.transform_steps));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->bases, image.bases));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->transform_kept, image.transform_kept));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->transform_table, image.transform_table));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->input_scales, image.input_scales));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->bias, image.bias));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->predictor, image.predictor));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->predictor_scales, image.predictor_scales));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->residual_bases, image.residual_bases));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->prediction_kept, image.prediction_kept));
  KVSTREAM_RETURN_IF_ERROR(UploadArray(impl->prediction_table, image.prediction_table));
  // The image's layout with the device's pointers.
  cuda::ProfileTables& t = impl->tables;
  t = image.HostTables();
  t.layers = image.layers;
  t.channels = image.channels;
  t.levels = image.levels;
  t.means = impl->means.get<float>();
  t.steps = impl->steps.get<float>();
  t.slots = impl->slots.get<uint32_t>();
  t.channel_table = impl->channel_table.get<uint16_t>();
  const bool transform = !image.bases.empty();
  t.transform_means = transform ? impl->transform_means.get<float>() : nullptr;
  t.transform_steps = transform ? impl->transform_steps.get<float>() : nullptr;
  t.bases = transform ? impl->bases.get<int16_t>() : nullptr;
  t.transform_kept = transform ? impl->transform_kept.get<uint32_t>() : nullptr;
  t.transform_table = transform ? impl->transform_table.get<uint16_t>() : nullptr;
  const bool prediction = !image.predictor.empty();
  t.input_scales = prediction ? impl->input_scales.get<float>() : nullptr;
  t.bias = prediction ? impl->bias.get<float>() : nullptr;
  t.predictor = prediction ? impl->predictor.get<int16_t>() : nullptr;
  t.predictor_scales = prediction ? impl->predictor_scales.get<float>() : nullptr;
  t.residual_bases = prediction ? impl->residual_bases.get<int16_t>() : nullptr;
  t.prediction_kept = prediction ? impl->prediction_kept.get<uint32_t>() : nullptr;
  t.prediction_table = prediction ? impl->prediction_table.get<uint16_t>() : nullptr;
  return DeviceProfile(std::move(impl));
}

struct GpuDecoder::Impl {
  Options options;
  DeviceBuffer scratch, data, jobs, frames, errors, tiles, bases;
  PinnedBuffer upload;       // the plan's arrays, one after another (UploadOffsets)
  PinnedBuffer host_errors;  // the segments' error codes, copied back after the launches
  cudaEvent_t done = nullptr;  // recorded after the errors' copy: Finish waits for this decode only
  cuda::DecodePlan plan;
  bool pending = false;
  ~Impl() {
    if (pending) cudaEventSynchronize(done);
    if (done) cudaEventDestroy(done);
  }
};

GpuDecoder::GpuDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuDecoder::GpuDecoder(GpuDecoder&&) noexcept = default;
GpuDecoder& GpuDecoder::operator=(GpuDecoder&&) noexcept = default;
GpuDecoder::~GpuDecoder() = default;

Result<GpuDecoder> GpuDecoder::Create(const Options& options) {
  std::string why;
  if (!GpuAvailable(&why)) return Status::Unsupported("GPU decoder: " + why);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  KVSTREAM_CUDA(cudaEventCreateWithFlags(&impl->done, cudaEventDisableTiming));
  return GpuDecoder(std::move(impl));
}

Status GpuDecoder::Decode(const std::vector<GpuChunk>& chunks, const DeviceProfile* profile,
                          const KvDestination& destination, CudaStream stream) {
  Impl& m = *impl_;
  if (m.pending) KVSTREAM_RETURN_IF_ERROR(Finish());
  if (destination.device != Device::kCuda) return Status::InvalidArgument("destination: the GPU decoder writes device memory");
  KVSTREAM_ASSIGN_OR_RETURN(m.plan, cuda::PlanDecode(chunks, profile ? &profile->profile() : nullptr, destination,
                                                     m.options.limits));
  if (m.plan.jobs.empty()) return Status::Ok();
  const cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  KVSTREAM_RETURN_IF_ERROR(m.scratch.Reserve(m.plan.scratch.bytes + 1));
  KVSTREAM_RETURN_IF_ERROR(m.data.Reserve(m.plan.data.size() * sizeof(uint32_t) + 1));
  cuda::AssignScratch(m.plan, m.scratch.get(), m.data.get<uint32_t>());
  const size_t n = m.plan.jobs.size();
  KVSTREAM_RETURN_IF_ERROR(m.jobs.Reserve(n * sizeof(cuda::SegmentJob)));
  KVSTREAM_RETURN_IF_ERROR(m.frames.Reserve(n * sizeof(cuda::SegmentFrame)));
  KVSTREAM_RETURN_IF_ERROR(m.errors.Reserve(n * sizeof(uint32_t)));
  KVSTREAM_RETURN_IF_ERROR(m.tiles.Reserve(m.plan.tile_first.size() * sizeof(uint32_t) + 1));
  KVSTREAM_RETURN_IF_ERROR(m.bases.Reserve(m.plan.bases.size() * sizeof(void*) + 1));
  KVSTREAM_RETURN_IF_ERROR(m.host_errors.Reserve(n * sizeof(uint32_t)));
  // The plan's arrays through pinned memory, each at a 16-byte boundary.
  struct Upload {
    const void* host;
    size_t bytes;
    void* device;
  };
  const Upload uploads[] = {{m.plan.jobs.data(), n * sizeof(cuda::SegmentJob), m.jobs.get()},
                            {m.plan.data.data(), m.plan.data.size() * sizeof(uint32_t), m.data.get()},
                            {m.plan.tile_first.data(), m.plan.tile_first.size() * sizeof(uint32_t), m.tiles.get()},
                            {m.plan.bases.data(), m.plan.bases.size() * sizeof(void*), m.bases.get()}};
  size_t total = 0;
  for (const Upload& u : uploads) total += (u.bytes + 15) / 16 * 16;
  KVSTREAM_RETURN_IF_ERROR(m.upload.Reserve(total + 1));
  size_t at = 0;
  for (const Upload& u : uploads) {
    if (u.bytes == 0) continue;
    std::memcpy(m.upload.get() + at, u.host, u.bytes);
    KVSTREAM_CUDA(cudaMemcpyAsync(u.device, m.upload.get() + at, u.bytes, cudaMemcpyHostToDevice, cuda_stream));
    at += (u.bytes + 15) / 16 * 16;
  }
  KVSTREAM_CUDA(cudaMemsetAsync(m.errors.get(), 0, n * sizeof(uint32_t), cuda_stream));
  const cuda::DecodeArgs args = cuda::MakeDecodeArgs(
      m.plan, m.jobs.get<cuda::SegmentJob>(), m.frames.get<cuda::SegmentFrame>(), m.errors.get<uint32_t>(),
      profile ? profile->impl().tables : cuda::ProfileTables{}, m.bases.get<void*>());
  const cuda::TileMap tiles{m.tiles.get<uint32_t>()};
  for (const cuda::KernelGrid& g : cuda::DecodeGrids(m.plan)) {
    switch (g.kernel) {
      case cuda::DecodeKernel::kFrames: FrameLaunch<<<g.blocks, g.threads, 0, cuda_stream>>>(args); break;
      case cuda::DecodeKernel::kTables: TableLaunch<<<g.blocks, g.threads, 0, cuda_stream>>>(args); break;
      case cuda::DecodeKernel::kEntropy: EntropyLaunch<<<g.blocks, g.threads, 0, cuda_stream>>>(args); break;
      case cuda::DecodeKernel::kEscapes: EscapeLaunch<<<g.blocks, g.threads, 0, cuda_stream>>>(args); break;
      case cuda::DecodeKernel::kReconstruct: ReconstructLaunch<<<g.blocks, g.threads, 0, cuda_stream>>>(args, tiles); break;
    }
    KVSTREAM_CUDA(cudaGetLastError());
  }
  KVSTREAM_CUDA(cudaMemcpyAsync(m.host_errors.get(), m.errors.get(), n * sizeof(uint32_t), cudaMemcpyDeviceToHost,
                                cuda_stream));
  KVSTREAM_CUDA(cudaEventRecord(m.done, cuda_stream));
  m.pending = true;
  return Status::Ok();
}

Status GpuDecoder::Finish() {
  Impl& m = *impl_;
  if (!m.pending) return Status::Ok();
  m.pending = false;
  KVSTREAM_CUDA(cudaEventSynchronize(m.done));
  return cuda::ReportErrors(m.plan, reinterpret_cast<const uint32_t*>(m.host_errors.get()));
}

Status DecodeChunks(const std::vector<GpuChunk>& chunks, const DeviceProfile* profile, const KvDestination& destination,
                    CudaStream stream) {
  KVSTREAM_ASSIGN_OR_RETURN(GpuDecoder decoder, GpuDecoder::Create());
  KVSTREAM_RETURN_IF_ERROR(decoder.Decode(chunks, profile, destination, stream));
  return decoder.Finish();
}

}  // namespace kvstream
