// From (element type, ReduceKind) to the reduce_ops.h functor that implements
// it, constructed on the device from the per-call arguments: PreMulSum's
// scalar is read from device memory when the kernel runs (so a scalar that a
// previous kernel wrote on the same stream is honoured), SumPostDiv gets the
// rank count.
#pragma once

#include "kernels/common/reduce_kind.h"
#include "kernels/common/reduce_ops.h"

namespace chorus::dev {

template <typename T, ReduceKind K>
struct FunctorOf;

template <typename T>
struct FunctorOf<T, ReduceKind::Sum> {
  using type = FuncSum<T>;
  static __device__ type make(const void*, int) { return {}; }
};
template <typename T>
struct FunctorOf<T, ReduceKind::Prod> {
  using type = FuncProd<T>;
  static __device__ type make(const void*, int) { return {}; }
};
template <typename T>
struct FunctorOf<T, ReduceKind::Max> {
  using type = FuncMax<T>;
  static __device__ type make(const void*, int) { return {}; }
};
template <typename T>
struct FunctorOf<T, ReduceKind::Min> {
  using type = FuncMin<T>;
  static __device__ type make(const void*, int) { return {}; }
};
template <typename T>
struct FunctorOf<T, ReduceKind::PreMulSum> {
  using type = FuncPreMulSum<T>;
  // No scalar reads as zero, as on the host (readScalar).
  static __device__ type make(const void* scalar, int) {
    return type(scalar != nullptr ? *static_cast<const T*>(scalar) : T{});
  }
};
template <typename T>
struct FunctorOf<T, ReduceKind::SumPostDiv> {
  using type = FuncSumPostDiv<T>;
  static __device__ type make(const void*, int divisor) { return type(divisor); }
};

}  // namespace chorus::dev
