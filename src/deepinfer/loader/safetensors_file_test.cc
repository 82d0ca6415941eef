#include "deepinfer/loader/safetensors_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/loader/test_util.h"

namespace deepinfer {
namespace {

constexpr const char* kLabel = "shard-7.safetensors";

StatusOr<std::unique_ptr<SafetensorsFile>> parse(const std::string& image) {
  return SafetensorsFile::parse_buffer(reinterpret_cast<const uint8_t*>(image.data()), image.size(),
                                       kLabel);
}

// The status has `code` and its message names the file and every string in `names`.
void expect_error(const std::string& image, StatusCode code,
                  std::initializer_list<const char*> names) {
  auto file = parse(image);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), code) << file.status().to_string();
  EXPECT_NE(file.status().message().find(kLabel), std::string::npos) << file.status().message();
  for (const char* n : names)
    EXPECT_NE(file.status().message().find(n), std::string::npos) << file.status().message();
}

std::string tensor_json(const std::string& name, const std::string& body) {
  return "\"" + name + "\":{" + body + "}";
}

TEST(SafetensorsFile, ParsesAHandWrittenFile) {
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]},)"
      R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  const std::string image =
      raw_safetensors(json, std::string("\x01\x02\x03\x04\x80\x3f\x00\x40", 8));
  auto file = parse(image);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ((*file)->tensors().size(), 2u);
  const TensorInfo* w = (*file)->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kBF16);
  EXPECT_EQ(w->shape, std::vector<int64_t>{2});
  EXPECT_EQ(w->nbytes, 4u);
  EXPECT_EQ(w->data, reinterpret_cast<const uint8_t*>(image.data()) + 8 + json.size() + 4);
  EXPECT_EQ(w->file, kLabel);
  EXPECT_EQ((*file)->find("b")->data[3], 0x04);
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
}

TEST(SafetensorsFile, AcceptsScalarsEmptyTensorsAndGaps) {
  const std::string json =
      "{" + tensor_json("s", R"("dtype":"F32","shape":[],"data_offsets":[8,12])") + "," +
      tensor_json("e", R"("dtype":"F32","shape":[0,3],"data_offsets":[2,2])") + "}";
  auto file = parse(raw_safetensors(json, std::string(12, '\0')));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ((*file)->find("s")->numel(), 1);
  EXPECT_EQ((*file)->find("e")->numel(), 0);
}

TEST(SafetensorsFile, OpenMissingFileIsNotFound) {
  auto file = SafetensorsFile::open("/nonexistent/dir/x.safetensors");
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/dir/x.safetensors"), std::string::npos);
}

TEST(SafetensorsFileCorrupt, ShorterThanTheLengthField) {
  expect_error(std::string(5, '\0'), StatusCode::kDataLoss, {"too short"});
}

TEST(SafetensorsFileCorrupt, HeaderLengthBeyondFileSize) {
  std::string image = raw_safetensors("{}", "");
  image[0] = 100;  // claims 100 header bytes, has 2
  expect_error(image, StatusCode::kDataLoss, {"header length 100"});
  std::string huge(8, '\xff');
  expect_error(huge + "{}", StatusCode::kDataLoss, {"header length"});
}

TEST(SafetensorsFileCorrupt, InvalidJson) {
  expect_error(raw_safetensors(R"({"a":{"dtype":"F32",)", ""), StatusCode::kDataLoss,
               {"not valid JSON"});
  expect_error(raw_safetensors("[1,2]", ""), StatusCode::kDataLoss, {"not an object"});
  expect_error(raw_safetensors(R"({"a":5})", ""), StatusCode::kDataLoss, {"'a'"});
}

TEST(SafetensorsFileCorrupt, MissingDtype) {
  expect_error(
      raw_safetensors("{" + tensor_json("t.w", R"("shape":[1],"data_offsets":[0,4])") + "}",
                      std::string(4, '\0')),
      StatusCode::kDataLoss, {"'t.w'", "dtype"});
}

TEST(SafetensorsFileCorrupt, MissingShape) {
  expect_error(
      raw_safetensors("{" + tensor_json("t.w", R"("dtype":"F32","data_offsets":[0,4])") + "}",
                      std::string(4, '\0')),
      StatusCode::kDataLoss, {"'t.w'", "shape"});
}

TEST(SafetensorsFileCorrupt, MissingDataOffsets) {
  expect_error(raw_safetensors("{" + tensor_json("t.w", R"("dtype":"F32","shape":[1])") + "}",
                               std::string(4, '\0')),
               StatusCode::kDataLoss, {"'t.w'", "data_offsets"});
}

TEST(SafetensorsFileCorrupt, MalformedFields) {
  const std::string data(8, '\0');
  expect_error(
      raw_safetensors("{" + tensor_json("t", R"("dtype":7,"shape":[1],"data_offsets":[0,4])") + "}",
                      data),
      StatusCode::kDataLoss, {"'t'", "dtype"});
  expect_error(
      raw_safetensors(
          "{" + tensor_json("t", R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])") + "}", data),
      StatusCode::kDataLoss, {"'t'", "shape"});
  expect_error(
      raw_safetensors(
          "{" + tensor_json("t", R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])") + "}",
          data),
      StatusCode::kDataLoss, {"'t'", "shape"});
  expect_error(
      raw_safetensors(
          "{" + tensor_json("t", R"("dtype":"F32","shape":[1],"data_offsets":[0])") + "}", data),
      StatusCode::kDataLoss, {"'t'", "data_offsets"});
  expect_error(
      raw_safetensors(
          "{" + tensor_json("t", R"("dtype":"F32","shape":[1],"data_offsets":[-4,0])") + "}", data),
      StatusCode::kDataLoss, {"'t'", "data_offsets"});
  expect_error(
      raw_safetensors("{" +
                          tensor_json("t", R"("dtype":"U8","shape":[4294967296,4294967296,16],)"
                                           R"("data_offsets":[0,4])") +
                          "}",
                      data),
      StatusCode::kDataLoss, {"'t'", "overflows"});
}

TEST(SafetensorsFileCorrupt, UnknownDtype) {
  expect_error(
      raw_safetensors(
          "{" + tensor_json("t.w", R"("dtype":"F64","shape":[1],"data_offsets":[0,8])") + "}",
          std::string(8, '\0')),
      StatusCode::kUnimplemented, {"'t.w'", "F64"});
}

TEST(SafetensorsFileCorrupt, OffsetsOutOfOrder) {
  expect_error(
      raw_safetensors(
          "{" + tensor_json("t.w", R"("dtype":"F32","shape":[1],"data_offsets":[4,0])") + "}",
          std::string(4, '\0')),
      StatusCode::kDataLoss, {"'t.w'", "out of order"});
}

TEST(SafetensorsFileCorrupt, OverlappingTensors) {
  const std::string json =
      "{" + tensor_json("a", R"("dtype":"F32","shape":[2],"data_offsets":[0,8])") + "," +
      tensor_json("b", R"("dtype":"F32","shape":[2],"data_offsets":[4,12])") + "}";
  expect_error(raw_safetensors(json, std::string(12, '\0')), StatusCode::kDataLoss,
               {"'a'", "'b'", "overlap"});
}

TEST(SafetensorsFileCorrupt, OffsetsOutsideTheDataSection) {
  expect_error(
      raw_safetensors(
          "{" + tensor_json("t.w", R"("dtype":"F32","shape":[4],"data_offsets":[0,16])") + "}",
          std::string(8, '\0')),
      StatusCode::kDataLoss, {"'t.w'", "past the data section"});
}

TEST(SafetensorsFileCorrupt, NbytesDisagreesWithShape) {
  expect_error(
      raw_safetensors(
          "{" + tensor_json("t.w", R"("dtype":"F32","shape":[3],"data_offsets":[0,8])") + "}",
          std::string(8, '\0')),
      StatusCode::kDataLoss, {"'t.w'", "[3]", "F32"});
  // Packed FP4: I8 shape counts bytes, so [2, 2] I8 must hold 4 bytes, not 8.
  expect_error(
      raw_safetensors(
          "{" + tensor_json("e.w", R"("dtype":"I8","shape":[2,2],"data_offsets":[0,8])") + "}",
          std::string(8, '\0')),
      StatusCode::kDataLoss, {"'e.w'"});
}

TEST(SafetensorsFileCorrupt, DuplicateTensorName) {
  const std::string json =
      "{" + tensor_json("t.w", R"("dtype":"U8","shape":[1],"data_offsets":[0,1])") + "," +
      tensor_json("t.w", R"("dtype":"U8","shape":[1],"data_offsets":[1,2])") + "}";
  expect_error(raw_safetensors(json, std::string(2, '\0')), StatusCode::kDataLoss,
               {"'t.w'", "twice"});
}

TEST(SafetensorsFileCorrupt, NonStringMetadata) {
  expect_error(raw_safetensors(R"({"__metadata__":{"step":3}})", ""), StatusCode::kDataLoss,
               {"step"});
}

TEST(SafetensorsFileCorrupt, TruncatedFileOnDisk) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("a.weight", DType::kF32, {2}, std::vector<uint8_t>(8, 0));
  w.add("z.weight", DType::kF32, {2}, std::vector<uint8_t>(8, 0));
  const std::string path = dir.path() + "/model.safetensors";
  ASSERT_TRUE(w.write(path).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  auto file = SafetensorsFile::open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(file.status().message().find(path), std::string::npos) << file.status().message();
  EXPECT_NE(file.status().message().find("'z.weight'"), std::string::npos)
      << file.status().message();
  // Truncated inside the header.
  std::filesystem::resize_file(path, 20);
  file = SafetensorsFile::open(path);
  EXPECT_EQ(file.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(file.status().message().find("header length"), std::string::npos);
  // Empty file.
  std::filesystem::resize_file(path, 0);
  file = SafetensorsFile::open(path);
  EXPECT_EQ(file.status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace deepinfer
