// kvstream/cuda.h (and the CUDA PipelineDevice) in a build without CUDA (-DKVSTREAM_CUDA=OFF, or no nvcc): every call says so.
#include <cstdlib>
#include <string>

#include "cuda/pipeline_device.h"
#include "kvstream/cuda.h"

namespace kvstream {
namespace {
Status Absent() { return Status::Unsupported("GPU decoder: this build has no CUDA (configure with nvcc and -DKVSTREAM_CUDA=ON)"); }
}  // namespace

bool GpuAvailable(std::string* why) {
  if (why) *why = "this build has no CUDA";
  return false;
}

struct DeviceProfile::Impl {};
DeviceProfile::DeviceProfile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceProfile::DeviceProfile(DeviceProfile&&) noexcept = default;
DeviceProfile& DeviceProfile::operator=(DeviceProfile&&) noexcept = default;
DeviceProfile::~DeviceProfile() = default;
const Profile& DeviceProfile::profile() const { std::abort(); }
size_t DeviceProfile::device_bytes() const { return 0; }
Result<DeviceProfile> DeviceProfile::Upload(const Profile&) { return Absent(); }

struct GpuDecoder::Impl {};
GpuDecoder::GpuDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuDecoder::GpuDecoder(GpuDecoder&&) noexcept = default;
GpuDecoder& GpuDecoder::operator=(GpuDecoder&&) noexcept = default;
GpuDecoder::~GpuDecoder() = default;
Result<GpuDecoder> GpuDecoder::Create(const Options&) { return Absent(); }
Status GpuDecoder::Decode(const std::vector<GpuChunk>&, const DeviceProfile*, const KvDestination&, CudaStream) { return Absent(); }
Status GpuDecoder::Finish() { return Absent(); }

Status DecodeChunks(const std::vector<GpuChunk>&, const DeviceProfile*, const KvDestination&, CudaStream) { return Absent(); }

Result<std::shared_ptr<void>> AllocateDeviceMemory(size_t, int) { return Absent(); }
Status CopyDeviceToHost(void*, const void*, size_t) { return Absent(); }

Result<std::unique_ptr<cuda::PipelineDevice>> cuda::MakeCudaPipelineDevice(std::shared_ptr<const Profile>, CudaStream,
                                                                           const DecodeLimits&) {
  return Absent();
}

}  // namespace kvstream
