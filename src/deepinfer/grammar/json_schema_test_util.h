// Test-only helpers of the JSON Schema tests: compile a schema, run a document through the
// grammar, and check lists of documents that must and must not be taken.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deepinfer/grammar/earley_matcher.h"
#include "deepinfer/grammar/json_schema.h"

namespace deepinfer::grammar::testing {

using Json = nlohmann::ordered_json;

inline std::shared_ptr<const CompiledGrammar> compile(const std::string& schema,
                                                      const JsonSchemaOptions& o = {}) {
  auto g = compile_json_schema_text(schema, o);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().to_string();
  if (!g.ok()) return nullptr;
  return std::make_shared<CompiledGrammar>(std::move(*g));
}

inline bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  EarleyMatcher m(g);
  return m.accept_bytes(text) && m.can_terminate();
}

struct Case {
  std::string schema;
  std::vector<std::string> good, bad;
};

// Issue 21. Expectations come from the specification (JSON Schema 2020-12 validation, RFC 1123,
// RFC 3339 appendix A, RFC 3986, RFC 6901): every "good" document is valid and every "bad" one
// invalid under the schema; "valid but not written" cases are marked as such (sound, not
// complete).
inline void check_cases(const std::vector<Case>& cases, const JsonSchemaOptions& o = {}) {
  for (const Case& c : cases) {
    auto g = compile(c.schema, o);
    if (!g) continue;
    for (const std::string& t : c.good)
      EXPECT_TRUE(accepts(g, t)) << c.schema << " should take " << t;
    for (const std::string& t : c.bad) EXPECT_FALSE(accepts(g, t)) << c.schema << " took " << t;
  }
}

// The schema is refused with `code`, and the message names `needle`.
inline void expect_error_with(const std::string& schema, const JsonSchemaOptions& o,
                              StatusCode code, const std::string& needle) {
  auto g = compile_json_schema_text(schema, o);
  ASSERT_FALSE(g.ok()) << schema;
  EXPECT_EQ(g.status().code(), code) << g.status().to_string();
  EXPECT_NE(g.status().message().find(needle), std::string::npos)
      << g.status().message() << " lacks " << needle;
}

inline void expect_error(const std::string& schema, StatusCode code, const std::string& needle) {
  expect_error_with(schema, {}, code, needle);
}

}  // namespace deepinfer::grammar::testing
