// The version-specific part of NCCL plugin support: one template over the
// table type whose `if constexpr` branches follow the layout differences
// listed in nccl_net_abi.h. Everything common to all versions is written once.
#include "transports/net/nccl_net_driver.h"

#include <dlfcn.h>

#include <climits>
#include <cstring>

#include "core/result.h"

namespace chorus {
namespace {

template <class T>
struct TableTraits;
template <>
struct TableTraits<ncclNet_v6_t> {
  static constexpr int kVersion = 6;
  using Props = ncclNetProperties_v6_t;
};
template <>
struct TableTraits<ncclNet_v7_t> {
  static constexpr int kVersion = 7;
  using Props = ncclNetProperties_v7_t;
};
template <>
struct TableTraits<ncclNet_v8_t> {
  static constexpr int kVersion = 8;
  using Props = ncclNetProperties_v8_t;
};
template <>
struct TableTraits<ncclNet_v9_t> {
  static constexpr int kVersion = 9;
  using Props = ncclNetProperties_v9_t;
};
template <>
struct TableTraits<ncclNet_v10_t> {
  static constexpr int kVersion = 10;
  using Props = ncclNetProperties_v10_t;
};
template <>
struct TableTraits<ncclNet_v11_t> {
  static constexpr int kVersion = 11;
  using Props = ncclNetProperties_v11_t;
};

ncclResult_t tooLarge(size_t size) {
  return fail(ncclInvalidArgument, "net: a %zu-byte message exceeds what this NCCL plugin table version takes (int)",
              size);
}

template <class Table>
class Driver final : public NcclNetDriver {
  static constexpr int V = TableTraits<Table>::kVersion;
  using Props = typename TableTraits<Table>::Props;
  // Sizes are int in isend/irecv before v9 and in regMr before v8.
  static constexpr bool kIntMessageSizes = V < 9;
  static constexpr bool kIntRegSizes = V < 8;

 public:
  explicit Driver(Table* sym) : t_(sym) {}
  int version() const override { return V; }
  const char* name() const override { return t_->name; }
  bool hasInit() const override { return t_->init != nullptr; }
  bool hasRegMrDmaBuf() const override { return t_->regMrDmaBuf != nullptr; }
  bool hasFinalize() const override {
    if constexpr (V >= 11) {
      return t_->finalize != nullptr;
    } else {
      return false;
    }
  }

  ncclResult_t init(ncclDebugLogger_t logger) override {
    if constexpr (V >= 11) {
      ncclNetCommConfig_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return t_->init(&ctx_, 0, &config, logger, nullptr);
    } else if constexpr (V == 10) {
      return t_->init(logger, nullptr);
    } else {
      return t_->init(logger);
    }
  }

  const char* missingEntry() const override {
    const Table& t = *t_;
    if (t.name == nullptr) return "name";
    if (t.devices == nullptr) return "devices";
    if (t.getProperties == nullptr) return "getProperties";
    if (t.listen == nullptr) return "listen";
    if (t.connect == nullptr) return "connect";
    if (t.accept == nullptr) return "accept";
    if (t.regMr == nullptr) return "regMr";
    if (t.deregMr == nullptr) return "deregMr";
    if (t.isend == nullptr) return "isend";
    if (t.irecv == nullptr) return "irecv";
    if (t.test == nullptr) return "test";
    if (t.closeSend == nullptr) return "closeSend";
    if (t.closeRecv == nullptr) return "closeRecv";
    if (t.closeListen == nullptr) return "closeListen";
    return nullptr;
  }

  ncclResult_t devices(int* ndev) override { return t_->devices(ndev); }

  ncclResult_t getProperties(int dev, chorusNetProperties_v1_t* out, int* maxRecvs) override {
    Props p;
    std::memset(&p, 0, sizeof(p));
    ncclResult_t res = t_->getProperties(dev, &p);
    if (res != ncclSuccess) return res;
    *out = chorusNetProperties_v1_t{};
    out->name = p.name;
    out->pciPath = p.pciPath;
    out->guid = p.guid;
    out->ptrSupport = p.ptrSupport;
    out->speedMbps = p.speed;
    out->port = p.port;
    out->latencyUs = p.latency;
    out->maxComms = p.maxComms;
    out->maxMessageBytes = INT_MAX;
    if constexpr (V >= 9) {
      if (p.maxP2pBytes > 0) out->maxMessageBytes = p.maxP2pBytes;
    }
    *maxRecvs = p.maxRecvs;
    return ncclSuccess;
  }

  ncclResult_t listen(int dev, void* handle, void** listenComm) override {
    if constexpr (V >= 11) {
      return t_->listen(ctx_, dev, handle, listenComm);
    } else {
      return t_->listen(dev, handle, listenComm);
    }
  }

  ncclResult_t connect(int dev, const void* handle, void** sendComm) override {
    void* h = const_cast<void*>(handle);
    if constexpr (V == 6) {
      return t_->connect(dev, h, sendComm);
    } else {
      ncclNetDeviceHandle_t* noOffload = nullptr;
      if constexpr (V >= 11) {
        return t_->connect(ctx_, dev, h, sendComm, &noOffload);
      } else if constexpr (V == 10) {
        ncclNetCommConfig_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
        return t_->connect(dev, &config, h, sendComm, &noOffload);
      } else {
        return t_->connect(dev, h, sendComm, &noOffload);
      }
    }
  }

  ncclResult_t accept(void* listenComm, void** recvComm) override {
    if constexpr (V == 6) {
      return t_->accept(listenComm, recvComm);
    } else {
      ncclNetDeviceHandle_t* noOffload = nullptr;
      return t_->accept(listenComm, recvComm, &noOffload);
    }
  }

  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    if constexpr (kIntRegSizes) {
      if (size > INT_MAX) return tooLarge(size);
      return t_->regMr(comm, data, static_cast<int>(size), type, mhandle);
    } else {
      return t_->regMr(comm, data, size, type, mhandle);
    }
  }

  ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) override {
    return t_->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
  }

  ncclResult_t deregMr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }

  ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    if constexpr (kIntMessageSizes) {
      if (size > INT_MAX) return tooLarge(size);
      return t_->isend(comm, data, static_cast<int>(size), tag, mhandle, request);
    } else if constexpr (V >= 10) {
      return t_->isend(comm, data, size, tag, mhandle, nullptr, request);
    } else {
      return t_->isend(comm, data, size, tag, mhandle, request);
    }
  }

  ncclResult_t irecv(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    void* datas[1] = {data};
    int tags[1] = {tag};
    void* mhandles[1] = {mhandle};
    if constexpr (kIntMessageSizes) {
      if (size > INT_MAX) return tooLarge(size);
      int sizes[1] = {static_cast<int>(size)};
      return t_->irecv(comm, 1, datas, sizes, tags, mhandles, request);
    } else {
      size_t sizes[1] = {size};
      if constexpr (V >= 10) {
        void* phandles[1] = {nullptr};
        return t_->irecv(comm, 1, datas, sizes, tags, mhandles, phandles, request);
      } else {
        return t_->irecv(comm, 1, datas, sizes, tags, mhandles, request);
      }
    }
  }

  ncclResult_t iflush(void* comm, void* data, size_t size, void* mhandle, void** request) override {
    *request = nullptr;
    if (t_->iflush == nullptr) return ncclSuccess;
    if (size > INT_MAX) return tooLarge(size);
    void* datas[1] = {data};
    int sizes[1] = {static_cast<int>(size)};
    void* mhandles[1] = {mhandle};
    return t_->iflush(comm, 1, datas, sizes, mhandles, request);
  }

  ncclResult_t test(void* request, int* done, size_t* size) override {
    int bytes = 0;
    ncclResult_t res = t_->test(request, done, &bytes);
    if (size != nullptr) *size = bytes < 0 ? 0 : static_cast<size_t>(bytes);
    return res;
  }

  ncclResult_t closeSend(void* comm) override { return t_->closeSend(comm); }
  ncclResult_t closeRecv(void* comm) override { return t_->closeRecv(comm); }
  ncclResult_t closeListen(void* comm) override { return t_->closeListen(comm); }

  ncclResult_t finalize() override {
    if constexpr (V >= 11) {
      if (t_->finalize != nullptr) return t_->finalize(ctx_);
    }
    return ncclSuccess;
  }

 private:
  Table* t_;  // the exported variable itself, never a copy
  void* ctx_ = nullptr;
};

template <class Table>
std::unique_ptr<NcclNetDriver> tryVersion(void* lib, const char* symbol, std::string* found) {
  auto* table = static_cast<Table*>(dlsym(lib, symbol));
  if (table == nullptr) return nullptr;
  *found = symbol;
  return std::make_unique<Driver<Table>>(table);
}

// Newest first, as NCCL looks them up.
std::unique_ptr<NcclNetDriver> newestTable(void* lib, std::string* symbol) {
  if (auto d = tryVersion<ncclNet_v11_t>(lib, "ncclNetPlugin_v11", symbol)) return d;
  if (auto d = tryVersion<ncclNet_v10_t>(lib, "ncclNetPlugin_v10", symbol)) return d;
  if (auto d = tryVersion<ncclNet_v9_t>(lib, "ncclNetPlugin_v9", symbol)) return d;
  if (auto d = tryVersion<ncclNet_v8_t>(lib, "ncclNetPlugin_v8", symbol)) return d;
  if (auto d = tryVersion<ncclNet_v7_t>(lib, "ncclNetPlugin_v7", symbol)) return d;
  return tryVersion<ncclNet_v6_t>(lib, "ncclNetPlugin_v6", symbol);
}

// The first ncclNetPlugin_vN with N > 11 the library exports, or "".
std::string newerSymbol(void* lib) {
  for (int v = 12; v <= 32; ++v) {
    const std::string s = "ncclNetPlugin_v" + std::to_string(v);
    if (dlsym(lib, s.c_str()) != nullptr) return s;
  }
  return "";
}

}  // namespace

std::unique_ptr<NcclNetDriver> ncclNetDriverFromLibrary(void* lib, std::string* symbol, std::string* why) {
  std::unique_ptr<NcclNetDriver> d = newestTable(lib, symbol);
  if (d == nullptr) {
    const std::string newer = newerSymbol(lib);
    *why = newer.empty() ? "it exports no network plugin table (looked for chorusNetPlugin_v1 and ncclNetPlugin_v11 "
                           "down to ncclNetPlugin_v6)"
                         : "it exports only " + newer + ", newer than the newest table this library knows (v11)";
    return nullptr;
  }
  // Before init only these two must be there: a plugin may fill in the rest in init.
  if (d->name() == nullptr || !d->hasInit()) {
    *why = *symbol + (d->name() == nullptr ? " has a NULL name" : " has a NULL init");
    return nullptr;
  }
  return d;
}

}  // namespace chorus
