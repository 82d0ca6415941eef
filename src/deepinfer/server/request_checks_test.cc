#include "deepinfer/server/request_checks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepinfer::server {
namespace {

using Values = std::vector<std::string_view>;

TEST(ConstantTimeEqual, ComparesLengthAndEveryByte) {
  EXPECT_TRUE(constant_time_equal("sk-abc", "sk-abc"));
  EXPECT_FALSE(constant_time_equal("sk-abc", "sk-abd"));
  EXPECT_FALSE(constant_time_equal("sk-abc", "sk-ab"));
  EXPECT_FALSE(constant_time_equal("", "x"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

TEST(CheckAuthorization, BearerSchemeInAnyCaseWithTheRightKeyPasses) {
  for (std::string_view v :
       {"Bearer k1", "bearer k1", "BEARER k1", "  Bearer   k1  ", "Bearer\tk1"})
    EXPECT_FALSE(check_authorization(Values{v}, "k1").has_value()) << v;
}

TEST(CheckAuthorization, MissingWrongOrMalformedIs401) {
  for (std::string_view v : {"Bearer k2", "Basic k1", "Bearerk1", "k1", "Bearer", ""}) {
    auto e = check_authorization(Values{v}, "k1");
    ASSERT_TRUE(e.has_value()) << v;
    EXPECT_EQ(e->http_status, 401) << v;
    EXPECT_EQ(e->code, "invalid_api_key");
  }
  auto none = check_authorization(Values{}, "k1");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->http_status, 401);
}

TEST(CheckAuthorization, DuplicateHeadersAre400EvenWhenBothAreRight) {
  auto e = check_authorization(Values{"Bearer k1", "Bearer k1"}, "k1");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
}

TEST(CheckHost, IpLiteralsAndLocalhostPass) {
  const std::vector<std::string> none;
  for (std::string_view h :
       {"127.0.0.1", "127.0.0.1:8000", "[::1]:80", "[::1]", "10.1.2.3", "localhost", "LOCALHOST:9"})
    EXPECT_FALSE(check_host(Values{h}, none).has_value()) << h;
}

TEST(CheckHost, NamesNeedAllowedHostsAndStarAllowsAny) {
  const std::vector<std::string> none, mine = {"My.Box"}, any = {"*"};
  auto e = check_host(Values{"evil.example:8000"}, none);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 403);
  EXPECT_EQ(e->code, "host_not_allowed");
  EXPECT_FALSE(check_host(Values{"my.box:8000"}, mine).has_value());
  EXPECT_TRUE(check_host(Values{"other.box"}, mine).has_value());
  EXPECT_FALSE(check_host(Values{"anything.example"}, any).has_value());
}

TEST(CheckHost, ExactlyOneHostHeaderIsRequired) {
  const std::vector<std::string> none;
  EXPECT_EQ(check_host(Values{}, none)->http_status, 400);
  EXPECT_EQ(check_host(Values{"localhost", "localhost"}, none)->http_status, 400);
}

TEST(CheckContentType, JsonTypesPassOthersAre415) {
  for (std::string_view t :
       {"application/json", "Application/JSON; charset=utf-8", "application/merge-patch+json"})
    EXPECT_FALSE(check_content_type(Values{t}).has_value()) << t;
  EXPECT_FALSE(check_content_type(Values{}).has_value());  // absent: accepted
  for (std::string_view t : {"text/plain", "application/x-www-form-urlencoded",
                             "multipart/form-data; boundary=x", "text/json+x"}) {
    auto e = check_content_type(Values{t});
    ASSERT_TRUE(e.has_value()) << t;
    EXPECT_EQ(e->http_status, 415);
  }
  EXPECT_TRUE(check_content_type(Values{"application/json", "text/plain"}).has_value());
}

}  // namespace
}  // namespace deepinfer::server
