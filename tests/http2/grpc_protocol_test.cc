#include "http2/grpc_protocol.h"

#include <gtest/gtest.h>

#include <chrono>

namespace uxds::http2 {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(GrpcTimeoutTest, EncodesInFinestUnitThatFitsEightDigits) {
  EXPECT_EQ(EncodeGrpcTimeout(nanoseconds(1)), "1n");
  EXPECT_EQ(EncodeGrpcTimeout(nanoseconds(99999999)), "99999999n");
  EXPECT_EQ(EncodeGrpcTimeout(nanoseconds(100000000)), "100000u");
  EXPECT_EQ(EncodeGrpcTimeout(milliseconds(1500)), "1500000u");
  EXPECT_EQ(EncodeGrpcTimeout(seconds(100000)), "100000S");
  EXPECT_EQ(EncodeGrpcTimeout(hours(1000000)), "60000000M");
  EXPECT_EQ(EncodeGrpcTimeout(nanoseconds::max()), "2562048H");
}

TEST(GrpcTimeoutTest, EncodingRoundsUp) {
  // 100000001 ns does not fit in nanoseconds: 100001 us, never less.
  EXPECT_EQ(EncodeGrpcTimeout(nanoseconds(100000001)), "100001u");
  const auto parsed = ParseGrpcTimeout(EncodeGrpcTimeout(nanoseconds(123456789012)));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_GE(*parsed, nanoseconds(123456789012));
}

TEST(GrpcTimeoutTest, NonPositiveEncodesAsOneNanosecond) {
  EXPECT_EQ(EncodeGrpcTimeout(nanoseconds(0)), "1n");
  EXPECT_EQ(EncodeGrpcTimeout(seconds(-5)), "1n");
}

TEST(GrpcTimeoutTest, ParsesEveryUnit) {
  EXPECT_EQ(ParseGrpcTimeout("5n"), nanoseconds(5));
  EXPECT_EQ(ParseGrpcTimeout("5u"), microseconds(5));
  EXPECT_EQ(ParseGrpcTimeout("5m"), milliseconds(5));
  EXPECT_EQ(ParseGrpcTimeout("5S"), seconds(5));
  EXPECT_EQ(ParseGrpcTimeout("5M"), minutes(5));
  EXPECT_EQ(ParseGrpcTimeout("5H"), hours(5));
  EXPECT_EQ(ParseGrpcTimeout("00000007S"), seconds(7));
  EXPECT_EQ(ParseGrpcTimeout("0m"), nanoseconds(0));
}

TEST(GrpcTimeoutTest, RejectsMalformedValues) {
  EXPECT_FALSE(ParseGrpcTimeout(""));
  EXPECT_FALSE(ParseGrpcTimeout("S"));
  EXPECT_FALSE(ParseGrpcTimeout("10"));
  EXPECT_FALSE(ParseGrpcTimeout("123456789S"));  // nine digits
  EXPECT_FALSE(ParseGrpcTimeout("10s"));         // unit is case-sensitive
  EXPECT_FALSE(ParseGrpcTimeout("1.5S"));
  EXPECT_FALSE(ParseGrpcTimeout("-1S"));
  EXPECT_FALSE(ParseGrpcTimeout(" 1S"));
}

TEST(GrpcTimeoutTest, HugeValuesAreClampedNotOverflowed) {
  const auto parsed = ParseGrpcTimeout("99999999H");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_GT(*parsed, hours(24 * 365 * 50));
  // now + timeout must not overflow the steady clock.
  const auto deadline = std::chrono::steady_clock::now() + *parsed;
  EXPECT_GT(deadline, std::chrono::steady_clock::now());
}

TEST(GrpcMessageTest, PercentEncodesExactlyTheSpecifiedBytes) {
  EXPECT_EQ(PercentEncodeGrpcMessage("plain text ~!$&"), "plain text ~!$&");
  EXPECT_EQ(PercentEncodeGrpcMessage("100%"), "100%25");
  EXPECT_EQ(PercentEncodeGrpcMessage("a\nb\tc\x7f"), "a%0Ab%09c%7F");
  // UTF-8 "é" is C3 A9.
  EXPECT_EQ(PercentEncodeGrpcMessage("caf\xc3\xa9"), "caf%C3%A9");
}

TEST(GrpcMessageTest, RoundTripsNonAsciiAndControlBytes) {
  const std::string message =
      "\t\ntest with whitespace\r\nand Unicode BMP \xe2\x98\xba and non-BMP "
      "\xf0\x9f\x98\x88\t\n 100% sure";
  const std::string encoded = PercentEncodeGrpcMessage(message);
  for (char c : encoded) {
    EXPECT_TRUE(c >= 0x20 && c <= 0x7E) << int(c);
  }
  EXPECT_EQ(PercentDecodeGrpcMessage(encoded), message);
}

TEST(GrpcMessageTest, DecodeKeepsBrokenEscapes) {
  EXPECT_EQ(PercentDecodeGrpcMessage("50%"), "50%");
  EXPECT_EQ(PercentDecodeGrpcMessage("%zz and %4"), "%zz and %4");
  EXPECT_EQ(PercentDecodeGrpcMessage("%41%4a%4A"), "AJJ");
}

TEST(StatusMappingTest, HttpStatusPerGrpcMappingDoc) {
  EXPECT_EQ(StatusCodeFromHttpStatus(400), StatusCode::kInternal);
  EXPECT_EQ(StatusCodeFromHttpStatus(401), StatusCode::kUnauthenticated);
  EXPECT_EQ(StatusCodeFromHttpStatus(403), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeFromHttpStatus(404), StatusCode::kUnimplemented);
  EXPECT_EQ(StatusCodeFromHttpStatus(429), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeFromHttpStatus(502), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeFromHttpStatus(503), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeFromHttpStatus(504), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeFromHttpStatus(500), StatusCode::kUnknown);
  EXPECT_EQ(StatusCodeFromHttpStatus(200), StatusCode::kUnknown);
  EXPECT_EQ(StatusCodeFromHttpStatus(415), StatusCode::kUnknown);
}

TEST(StatusMappingTest, RstStreamCodesPerProtocolDoc) {
  EXPECT_EQ(StatusFromRstStream(0).code(), StatusCode::kInternal);
  EXPECT_EQ(StatusFromRstStream(1).code(), StatusCode::kInternal);
  EXPECT_EQ(StatusFromRstStream(2).code(), StatusCode::kInternal);
  EXPECT_EQ(StatusFromRstStream(7).code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromRstStream(8).code(), StatusCode::kCancelled);
  EXPECT_EQ(StatusFromRstStream(11).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusFromRstStream(12).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusFromRstStream(99).code(), StatusCode::kInternal);
  EXPECT_NE(StatusFromRstStream(7).message().find("REFUSED_STREAM"), std::string::npos);
}

TEST(StatusMappingTest, ParsesGrpcStatus) {
  EXPECT_EQ(ParseGrpcStatus("0"), StatusCode::kOk);
  EXPECT_EQ(ParseGrpcStatus("14"), StatusCode::kUnavailable);
  EXPECT_EQ(ParseGrpcStatus("16"), StatusCode::kUnauthenticated);
  EXPECT_EQ(ParseGrpcStatus("17"), StatusCode::kUnknown);
  EXPECT_EQ(ParseGrpcStatus("999"), StatusCode::kUnknown);
  EXPECT_FALSE(ParseGrpcStatus(""));
  EXPECT_FALSE(ParseGrpcStatus("abc"));
  EXPECT_FALSE(ParseGrpcStatus("-1"));
  EXPECT_FALSE(ParseGrpcStatus("1 "));
}

TEST(StatusMappingTest, GrpcContentTypes) {
  EXPECT_TRUE(IsGrpcContentType("application/grpc"));
  EXPECT_TRUE(IsGrpcContentType("application/grpc+proto"));
  EXPECT_TRUE(IsGrpcContentType("application/grpc;charset=utf-8"));
  EXPECT_FALSE(IsGrpcContentType("application/grpcx"));
  EXPECT_FALSE(IsGrpcContentType("application/json"));
  EXPECT_FALSE(IsGrpcContentType(""));
}

}  // namespace
}  // namespace uxds::http2
