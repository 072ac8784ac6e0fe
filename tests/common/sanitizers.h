// Whether this test executable was built with AddressSanitizer (the
// sanitizer build of scripts/test.sh), where a case runs several times
// slower. Only repetition counts that serve a statistic, already met by the
// uninstrumented run of the same case, are cut there.
#pragma once

namespace chorus::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif

}  // namespace chorus::test
