// What the rest of the library asks of the GPU, without CUDA headers.
//
// CUDA builds implement this in src/gpu/cuda/ (CUDA runtime, the kernels of
// kernels/, the P2P transport); builds without CUDA link src/gpu/no_cuda/,
// where every call that needs a GPU fails with ncclInvalidUsage and says that
// the build has no CUDA support. Callers decide with usable() before they
// put a communicator into GPU mode, so the second case is only ever reached
// through a direct request (CHORUS_MODE=gpu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/gpu_state_handle.h"
#include "nccl.h"

struct ncclComm;

namespace chorus {
struct Plan;
struct OpMismatchRecord;
}  // namespace chorus

namespace chorus::gpu {

// Per-communicator GPU resources (src/gpu/cuda/comm_state.h) are held
// through gpu::CommStatePtr (core/gpu_state_handle.h).

// True in builds with CUDA support.
bool built();
// Whether GPU mode can run in this process: CUDA support, a driver and at
// least one visible device. When not, `why` (may be null) says why.
bool usable(std::string* why);
// The calling thread's current CUDA device, and switching it.
ncclResult_t currentDevice(int* device);
ncclResult_t selectDevice(int device);
// PCI bus id of `device` ("0000:3b:00.0"; "" when unknown), and the device
// of this process with that bus id (-1 when not visible here).
std::string pciBusId(int device);
int deviceWithBusId(const char* busId);
// A hash of the sorted bus ids of every GPU this process sees (PeerInfo::visibleGpus).
uint64_t visibleGpusHash();
// Whether a kernel may use `ptr` as it is: device memory (*device: its GPU),
// managed memory, or pinned host memory mapped at the same address (*device
// -1: reachable from any GPU). False for pageable or unknown memory, and for
// pinned memory whose device address differs from `ptr`.
bool devicePointer(const void* ptr, int* device);
// "" when a kernel on `device` may use `ptr` as it is; else why not ("is not
// device memory", "is memory of GPU 1").
std::string whyUnreachable(const void* ptr, int device);

// Device memory for ncclMemAlloc/ncclMemFree (on the current device).
ncclResult_t memAlloc(void** ptr, size_t bytes);
ncclResult_t memFree(void* ptr);

// Device memory on `device` that a network backend reads or writes directly
// (GPUDirect RDMA FIFO slots), zeroed. It is freed when the last copy of
// *keep goes (releaseWhenIdle: never while another kernel spins).
ncclResult_t allocDeviceBuffer(int device, size_t bytes, std::shared_ptr<void>* keep, void** ptr);
// Whether `device`'s memory can be exported as a dma-buf file descriptor
// (driver and kernel support), and the export of [ptr, ptr + bytes): *fd
// (the caller closes it) covers whole host pages from *offset before ptr.
bool dmabufSupported(int device);
ncclResult_t dmabufExport(int device, void* ptr, size_t bytes, int* fd, uint64_t* offset);
// Whether `device` supports GPUDirect RDMA at all (a NIC writing its memory).
bool gpuDirectRdmaSupported(int device);

// Makes host memory (a shared-memory FIFO, a network FIFO, residuals)
// reachable by kernels of `device`: pins and maps the `bytes` at `base`, which
// lie in what `owner` keeps alive, and returns the address kernels use.
// *keep holds the mapping and `owner`. When its last copy goes, the unmapping
// and then the release of `owner` wait until no kernel runs on the device
// (releaseWhenIdle): an unmapping waits for the whole device, and the memory
// must not be reused while it is still registered.
ncclResult_t mapHostMemory(int device, void* base, size_t bytes, std::shared_ptr<void> owner,
                           std::shared_ptr<void>* keep, void** deviceAddress);

// Runs `release` (a free of memory kernels on `device` may use) now, or once
// no communicator of this process has kernels running on the device: a free
// waits for the whole device, so one made while another communicator's
// kernel spins would never return (src/gpu/deferred_release.h). Without
// CUDA: now.
void releaseWhenIdle(int device, std::function<void()> release);
// For a thread that kernels may wait on (the network proxy): the releases it
// triggers are always handed to the GPU watchdog, never run on it, since a
// free waits for every kernel of the device, including one that another
// communicator launches after the idle check and that waits for this thread.
void declareKernelsWaitOnThisThread();

// GPU-mode communicator lifecycle. setup runs at init after the peers are
// known; teardown stops the communicator's kernels (abort: at once through
// the abort flag; else after waiting, bounded by the communicator's timeout,
// for them to finish) and frees what setup and the launches allocated.
ncclResult_t commSetup(ncclComm* comm);
void commTeardown(ncclComm* comm, bool abort);
// Waits, bounded by the communicator's timeout, until the kernels it launched
// have finished (ncclCommFinalize); an error if they did not or one failed.
// The caller holds the opMutex, so the watchdog cannot look at the network
// links meanwhile: the wait does, and a peer that is gone (commPeerGone)
// stops the kernels as the watchdog would.
ncclResult_t commDrain(ncclComm* comm);
// ncclSuccess, or the error one of the communicator's kernels reported
// (aborted, timed out, protocol violation); the error is also recorded on the
// communicator, so later calls fail fast with the same message.
ncclResult_t commPollError(ncclComm* comm);
// Sets the device-visible abort flag: running kernels stop within microseconds.
void commSignalAbort(ncclComm* comm);
// A peer is gone (`why` names it) while the communicator's kernels run:
// warns, records ncclRemoteError on the communicator and stops the kernels.
// Returns the message recorded.
std::string commStopForGonePeer(ncclComm* comm, const std::string& why);

// Leaves the mismatch `r` on every connector end of the communicator that
// holds no verdict yet (ends may be device memory: written with copies), so
// kernels waiting on them stop with it (src/gpu/cuda/verdict_copy.cc).
void spreadVerdict(ncclComm* comm, const OpMismatchRecord& r);

// Launches each plan and returns without waiting (the plans' connectors are
// connected already). streams[i] lists the distinct streams plans[i]'s tasks
// were called with, first call first: the work runs on the first, after
// everything already queued on the others, and the others wait for it.
ncclResult_t launchPlans(std::span<Plan* const> plans, std::span<const std::vector<cudaStream_t>> streams);

}  // namespace chorus::gpu
