#include "http2/metadata.h"

#include <gtest/gtest.h>

#include <string>

namespace uxds::http2 {
namespace {

TEST(MetadataTest, KeyGrammar) {
  EXPECT_TRUE(IsValidMetadataKey("x-user.id_2"));
  EXPECT_FALSE(IsValidMetadataKey(""));
  EXPECT_FALSE(IsValidMetadataKey("X-Upper"));
  EXPECT_FALSE(IsValidMetadataKey(":path"));
  EXPECT_FALSE(IsValidMetadataKey("has space"));
}

TEST(MetadataTest, ValidateRejectsReservedAndInvalid) {
  EXPECT_TRUE(ValidateMetadataToSend({{"x-a", "printable value"}, {"x-b-bin", "\x00\xff"}}).ok());
  EXPECT_TRUE(ValidateMetadataToSend({{"grpc-status-details-bin", "x"}}).ok());
  for (const char* key : {"content-type", "te", "grpc-timeout", "grpc-status", "grpc-foo",
                          "connection", "user-agent"}) {
    Status status = ValidateMetadataToSend({{key, "v"}});
    EXPECT_EQ(status.code(), StatusCode::kInternal) << key;
    EXPECT_NE(status.message().find(key), std::string::npos) << status.ToString();
  }
  EXPECT_EQ(ValidateMetadataToSend({{"Bad", "v"}}).code(), StatusCode::kInternal);
  EXPECT_EQ(ValidateMetadataToSend({{"x-a", "line\nbreak"}}).code(), StatusCode::kInternal);
  EXPECT_EQ(ValidateMetadataToSend({{"x-a", "caf\xc3\xa9"}}).code(), StatusCode::kInternal);
}

TEST(MetadataTest, Base64EncodesUnpadded) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg");
  EXPECT_EQ(Base64Encode("fo"), "Zm8");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode(std::string("\xff\xfe\x00", 3)), "//4A");
}

TEST(MetadataTest, Base64DecodesPaddedAndUnpadded) {
  EXPECT_EQ(Base64Decode("Zg"), "f");
  EXPECT_EQ(Base64Decode("Zg=="), "f");
  EXPECT_EQ(Base64Decode("Zm8"), "fo");
  EXPECT_EQ(Base64Decode("Zm8="), "fo");
  EXPECT_EQ(Base64Decode("Zm9vYmFy"), "foobar");
  EXPECT_EQ(Base64Decode(""), "");
  EXPECT_FALSE(Base64Decode("Z"));
  EXPECT_FALSE(Base64Decode("Zm9v!"));
  EXPECT_FALSE(Base64Decode("Zg=a"));
}

TEST(MetadataTest, Base64RoundTripsEveryByte) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  for (size_t len = 0; len <= bytes.size(); len += 37) {
    const std::string part = bytes.substr(0, len);
    EXPECT_EQ(Base64Decode(Base64Encode(part)), part) << len;
  }
}

TEST(MetadataTest, BinaryValuesAreEncodedOnTheWire) {
  EXPECT_EQ(EncodeMetadataValue("x-trace-bin", "foo"), "Zm9v");
  EXPECT_EQ(EncodeMetadataValue("x-trace", "foo"), "foo");
}

TEST(MetadataTest, ReceivedBinaryValuesAreSplitAndDecoded) {
  Metadata md;
  AppendReceivedMetadata(md, "x-a", "one, two");
  AppendReceivedMetadata(md, "x-b-bin", "Zm9v,YmE=, Zg");
  AppendReceivedMetadata(md, "x-c-bin", "not base64!");
  ASSERT_EQ(md.size(), 5u);
  EXPECT_EQ(md[0], (std::pair<std::string, std::string>("x-a", "one, two")));
  EXPECT_EQ(md[1].second, "foo");
  EXPECT_EQ(md[2].second, "ba");
  EXPECT_EQ(md[3].second, "f");
  EXPECT_EQ(md[4].second, "not base64!");
  EXPECT_EQ(*FindMetadata(md, "x-b-bin"), "foo");
  EXPECT_EQ(FindMetadata(md, "x-missing"), nullptr);
}

}  // namespace
}  // namespace uxds::http2
