// The verbs backend's connection and data-path entries (see README.md for
// the protocol). Without CHORUS_HAVE_IBVERBS they only report errors; they are
// unreachable then anyway, since the backend has no devices.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace chorus::ib {

ncclResult_t ibListen(int dev, void* handle, void** listenComm);
ncclResult_t ibConnect(int dev, const void* handle, void** sendComm);
ncclResult_t ibAccept(void* listenComm, void** recvComm);
ncclResult_t ibRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t ibRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
ncclResult_t ibDeregMr(void* comm, void* mhandle);
ncclResult_t ibIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t ibIrecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t ibIflush(void* recvComm, void* data, size_t size, void* mhandle, void** request);
ncclResult_t ibTest(void* request, int* done, size_t* size);
ncclResult_t ibCloseSend(void* sendComm);
ncclResult_t ibCloseRecv(void* recvComm);
ncclResult_t ibCloseListen(void* listenComm);

}  // namespace chorus::ib
