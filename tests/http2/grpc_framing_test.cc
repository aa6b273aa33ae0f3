#include "http2/grpc_framing.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <string>

namespace uxds::http2 {
namespace {

std::string Frame(std::string_view message) {
  std::string out;
  EXPECT_TRUE(AppendGrpcFrame(out, message).ok());
  return out;
}

TEST(GrpcFramingTest, PrefixIsFlagAndBigEndianLength) {
  const std::string framed = Frame(std::string(0x010203, 'x'));
  ASSERT_EQ(framed.size(), 5u + 0x010203);
  EXPECT_EQ(framed[0], 0);
  EXPECT_EQ(framed[1], 0x00);
  EXPECT_EQ(framed[2], 0x01);
  EXPECT_EQ(framed[3], 0x02);
  EXPECT_EQ(framed[4], 0x03);
}

// A message the 4-byte length cannot carry is an error, not an assert. The
// bytes are a reserved, never touched mapping: nothing is read or copied.
TEST(GrpcFramingTest, MessageOverFourGibibytesIsRefused) {
  const size_t size = kMaxGrpcFrameMessageSize + 1;
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  std::string out = "kept";
  const Status framed = AppendGrpcFrame(out, std::string_view(static_cast<char*>(mapped), size));
  EXPECT_EQ(framed.code(), StatusCode::kResourceExhausted) << framed.ToString();
  EXPECT_NE(framed.message().find("4294967295"), std::string::npos) << framed.ToString();
  EXPECT_EQ(out, "kept");
  munmap(mapped, size);
}

TEST(GrpcFramingTest, EmptyMessageRoundTrips) {
  GrpcDeframer deframer;
  MessageQueue out;
  ASSERT_TRUE(deframer.Feed(Frame(""), out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], "");
  EXPECT_FALSE(deframer.has_partial_message());
}

TEST(GrpcFramingTest, MessagesSplitAtEveryByteBoundary) {
  const std::string stream = Frame("hello") + Frame("") + Frame(std::string(300, 'z')) + Frame("!");
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    GrpcDeframer deframer;
    MessageQueue out;
    ASSERT_TRUE(deframer.Feed(std::string_view(stream).substr(0, cut), out).ok());
    ASSERT_TRUE(deframer.Feed(std::string_view(stream).substr(cut), out).ok());
    ASSERT_EQ(out.size(), 4u) << "cut at " << cut;
    EXPECT_EQ(out[0], "hello");
    EXPECT_EQ(out[1], "");
    EXPECT_EQ(out[2], std::string(300, 'z'));
    EXPECT_EQ(out[3], "!");
    EXPECT_FALSE(deframer.has_partial_message());
  }
}

TEST(GrpcFramingTest, ByteAtATime) {
  const std::string stream = Frame("abc") + Frame("defgh");
  GrpcDeframer deframer;
  MessageQueue out;
  for (char c : stream) ASSERT_TRUE(deframer.Feed(std::string_view(&c, 1), out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], "abc");
  EXPECT_EQ(out[1], "defgh");
}

TEST(GrpcFramingTest, PartialMessageIsReported) {
  GrpcDeframer deframer;
  MessageQueue out;
  const std::string framed = Frame("abcdef");
  ASSERT_TRUE(deframer.Feed(std::string_view(framed).substr(0, 3), out).ok());
  EXPECT_TRUE(deframer.has_partial_message());
  ASSERT_TRUE(deframer.Feed(std::string_view(framed).substr(3, 4), out).ok());
  EXPECT_TRUE(deframer.has_partial_message());
  EXPECT_TRUE(out.empty());
}

// A message arriving in pieces of every size around kPieceSize is joined
// byte for byte, and partial_size() counts what has arrived, no more (the
// connection's flow-control accounting is charged with it).
TEST(GrpcFramingTest, MessageInPiecesIsJoinedAndCountedAsItArrives) {
  std::string body(3 * GrpcDeframer::kPieceSize + 123, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  const std::string framed = Frame(body) + Frame("next");
  for (size_t piece : {size_t{1}, size_t{7}, GrpcDeframer::kPieceSize - 1, GrpcDeframer::kPieceSize,
                       GrpcDeframer::kPieceSize + 1, size_t{10000}}) {
    GrpcDeframer deframer;
    MessageQueue out;
    size_t fed = 0;
    while (fed < framed.size()) {
      const size_t n = std::min(piece, framed.size() - fed);
      ASSERT_TRUE(deframer.Feed(std::string_view(framed).substr(fed, n), out).ok());
      fed += n;
      if (out.empty()) {
        EXPECT_EQ(deframer.partial_size(), fed) << "pieces of " << piece;
      }
    }
    ASSERT_EQ(out.size(), 2u) << "pieces of " << piece;
    EXPECT_EQ(out[0], body) << "pieces of " << piece;
    EXPECT_EQ(out[0].capacity(), body.size()) << "allocated at its size";
    EXPECT_EQ(out[1], "next");
    EXPECT_EQ(deframer.partial_size(), 0u);
  }
}

TEST(GrpcFramingTest, MessageAtTheLimitIsAccepted) {
  GrpcDeframer deframer(/*max_message_size=*/10);
  MessageQueue out;
  ASSERT_TRUE(deframer.Feed(Frame(std::string(10, 'a')), out).ok());
  EXPECT_EQ(out.size(), 1u);
}

TEST(GrpcFramingTest, OversizeMessageIsResourceExhaustedFromItsPrefix) {
  GrpcDeframer deframer(/*max_message_size=*/10);
  MessageQueue out;
  // Only the prefix: the limit is enforced before the body is buffered.
  const std::string framed = Frame(std::string(11, 'a'));
  Status status = deframer.Feed(std::string_view(framed).substr(0, 5), out);
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("11 vs. 10"), std::string::npos) << status.ToString();
  // The error sticks.
  EXPECT_EQ(deframer.Feed("x", out).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(out.empty());
}

TEST(GrpcFramingTest, CompressedFlagWithoutEncodingIsInternal) {
  GrpcDeframer deframer;
  MessageQueue out;
  std::string framed = Frame("abc");
  framed[0] = 1;
  Status status = deframer.Feed(framed, out);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("grpc-encoding"), std::string::npos);
  EXPECT_TRUE(out.empty());
}

TEST(GrpcFramingTest, InvalidFlagIsInternal) {
  GrpcDeframer deframer;
  MessageQueue out;
  std::string framed = Frame("abc");
  framed[0] = 7;
  EXPECT_EQ(deframer.Feed(framed, out).code(), StatusCode::kInternal);
}

TEST(GrpcFramingTest, MessagesBeforeAnErrorAreDelivered) {
  GrpcDeframer deframer(/*max_message_size=*/4);
  MessageQueue out;
  EXPECT_EQ(deframer.Feed(Frame("ok") + Frame("too long"), out).code(),
            StatusCode::kResourceExhausted);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], "ok");
}

TEST(GrpcFramingTest, MessageQueueKeepsOrderAndDropsConsumedSlots) {
  MessageQueue queue;
  EXPECT_TRUE(queue.empty());
  // A reader one message behind its writer, for long: every message comes
  // out once, in order, and the consumed slots do not pile up.
  queue.push_back("m0");
  for (int i = 1; i <= 10000; ++i) {
    queue.push_back("m" + std::to_string(i));
    ASSERT_EQ(queue.size(), 2u);
    ASSERT_EQ(queue.front(), "m" + std::to_string(i - 1));
    ASSERT_EQ(queue[1], "m" + std::to_string(i));
    ASSERT_EQ(queue.pop_front(), "m" + std::to_string(i - 1));
    ASSERT_LE(queue.slots(), 34u) << "after " << i;
  }
  EXPECT_EQ(queue.pop_front(), "m10000");
  EXPECT_TRUE(queue.empty());
  // Many unread messages when the consumed slots are dropped: they move
  // to the front in order.
  for (int i = 0; i < 100; ++i) queue.push_back("n" + std::to_string(i));
  for (int i = 0; i < 60; ++i) ASSERT_EQ(queue.pop_front(), "n" + std::to_string(i));
  ASSERT_EQ(queue.size(), 40u);
  EXPECT_LT(queue.slots(), 100u);
  for (int i = 60; i < 100; ++i) ASSERT_EQ(queue.pop_front(), "n" + std::to_string(i));
  // A burst's vector is freed once read, not kept for the stream's life.
  EXPECT_EQ(queue.capacity(), 0u);
  EXPECT_TRUE(queue.empty());
  queue.push_back("again");
  EXPECT_EQ(queue.size(), 1u);
  queue.clear();
  EXPECT_TRUE(queue.empty());
}

}  // namespace
}  // namespace uxds::http2
