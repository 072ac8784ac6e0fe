#include "core/coll_types.h"

namespace chorus {

const char* collName(CollType t) {
  switch (t) {
    case CollType::AllReduce:
      return "AllReduce";
    case CollType::Broadcast:
      return "Broadcast";
    case CollType::Reduce:
      return "Reduce";
    case CollType::AllGather:
      return "AllGather";
    case CollType::ReduceScatter:
      return "ReduceScatter";
    case CollType::AlltoAll:
      return "AlltoAll";
    case CollType::Gather:
      return "Gather";
    case CollType::Scatter:
      return "Scatter";
    case CollType::Send:
      return "Send";
    case CollType::Recv:
      return "Recv";
  }
  return "?";
}

bool isPointToPoint(CollType t) {
  switch (t) {
    case CollType::Send:
    case CollType::Recv:
    case CollType::AlltoAll:
    case CollType::Gather:
    case CollType::Scatter:
      return true;
    default:
      return false;
  }
}

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* algoName(Algo a) {
  switch (a) {
    case Algo::Ring:
      return "Ring";
    case Algo::Tree:
      return "Tree";
    case Algo::Direct:
      return "Direct";
    case Algo::Hier:
      return "Hier";
  }
  return "?";
}

const char* protoName(Proto p) { return p == Proto::Simple ? "Simple" : "LL"; }

}  // namespace chorus
