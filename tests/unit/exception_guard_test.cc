// core/exception_guard.h: what an exception becomes at the library's edges
// (exported functions and the bodies of internal threads).
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/exception_guard.h"
#include "core/result.h"

namespace chorus {
namespace {

TEST(ExceptionGuard, OutOfMemoryIsASystemErrorWithAMessage) {
  const ncclResult_t res = guardedCall("test thread", []() -> ncclResult_t { throw std::bad_alloc(); });
  EXPECT_EQ(res, ncclSystemError);
  const std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("test thread"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
}

TEST(ExceptionGuard, OtherExceptionsAreInternalErrors) {
  EXPECT_EQ(guardedCall("t", []() -> ncclResult_t { throw std::runtime_error("boom 17"); }), ncclInternalError);
  EXPECT_NE(std::string(lastErrorMessage()).find("boom 17"), std::string::npos);
  EXPECT_EQ(guardedRun("t", [] { throw 42; }), ncclInternalError);
  EXPECT_NE(std::string(lastErrorMessage()).find("not a std::exception"), std::string::npos);
}

TEST(ExceptionGuard, ResultsPassThrough) {
  EXPECT_EQ(guardedCall("t", [] { return ncclRemoteError; }), ncclRemoteError);
  int ran = 0;
  EXPECT_EQ(guardedRun("t", [&] { ++ran; }), ncclSuccess);
  EXPECT_EQ(ran, 1);
}

// Without the guard this would reach std::terminate and abort the test.
TEST(ExceptionGuard, AThreadBodyThatThrowsEndsWithAnError) {
  ncclResult_t res = ncclSuccess;
  std::string msg;
  std::thread t([&] {
    res = guardedRun("worker", [] { throw std::bad_alloc(); });
    msg = lastErrorMessage();  // per thread
  });
  t.join();
  EXPECT_EQ(res, ncclSystemError);
  EXPECT_NE(msg.find("worker: out of memory"), std::string::npos) << msg;
}

}  // namespace
}  // namespace chorus
