#include "core/coll_types.h"

#include "core/type_dispatch.h"

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
  // The element type's size (0 for an invalid type: dispatchType's default).
  return dispatchType(t, [](auto tag) -> size_t { return sizeof(typename decltype(tag)::type); });
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
