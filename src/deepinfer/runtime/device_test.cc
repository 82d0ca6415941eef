#include "deepinfer/runtime/device.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace deepinfer::runtime {
namespace {

TEST(Device, ParsesBothSpellingsOfTheGpu) {
  EXPECT_EQ(*parse_device("cpu"), Device::kCpu);
  EXPECT_EQ(*parse_device("cuda"), Device::kCuda);
  EXPECT_EQ(*parse_device("nvidia"), Device::kCuda);
  auto bad = parse_device("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--device"), std::string::npos);
  EXPECT_NE(bad.status().message().find("tpu"), std::string::npos);
}

TEST(Device, DefaultFollowsDeepinferAccelerator) {
  ::unsetenv("DEEPINFER_ACCELERATOR");
  EXPECT_EQ(*default_device(), Device::kCpu);
  ::setenv("DEEPINFER_ACCELERATOR", "nvidia", 1);
  EXPECT_EQ(*default_device(), Device::kCuda);
  ::setenv("DEEPINFER_ACCELERATOR", "gpu", 1);
  auto bad = default_device();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("DEEPINFER_ACCELERATOR"), std::string::npos);
  ::unsetenv("DEEPINFER_ACCELERATOR");
}

}  // namespace
}  // namespace deepinfer::runtime
