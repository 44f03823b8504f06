// A template dsx cannot read, or an operation that fails while rendering, is an Error(Format)
// that names the line and what is wrong, never a crash or a silently wrong text.
#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include <fstream>
#include <iterator>
#include <string>

#include "dsx/error.h"
#include "jinja/template.h"

namespace dsx::jinja {
namespace {

// The message of the Error that reading (and then rendering) `source` gives; "" when none.
std::string error_of(const std::string& source, const Dict& variables = {}) {
  try {
    Template(source).render(variables);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Format) << e.what();
    return e.what();
  }
  return "";
}

// data/bad_templates.json: each template, the line its error must name, and what it must say.
TEST(JinjaErrors, EveryBadTemplateNamesItsLineAndWhatIsWrong) {
  std::ifstream in(std::string(DSX_SOURCE_DIR) + "/tests/jinja/data/bad_templates.json");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  rapidjson::Document cases;
  cases.Parse(text.c_str(), text.size());
  ASSERT_TRUE(cases.IsArray());
  ASSERT_GE(cases.Size(), 20u);
  for (const auto& c : cases.GetArray()) {
    const std::string source = c["source"].GetString();
    const std::string what = error_of(source);
    const std::string line = "line " + std::to_string(c["line"].GetInt()) + ":";
    EXPECT_EQ(what.rfind(line, 0), 0u) << c["group"].GetString() << ": " << source << " -> " << what;
    EXPECT_NE(what.find(c["says"].GetString()), std::string::npos)
        << c["group"].GetString() << ": " << source << " -> " << what;
  }
}

TEST(JinjaErrors, RaiseExceptionCarriesTheTemplatesOwnMessage) {
  const std::string what = error_of("{% if messages | length == 0 %}{{ raise_exception('No messages!') }}{% endif %}",
                                    Dict{{{"messages", List{}}}});
  EXPECT_EQ(what, "raise_exception: No messages!");
}

TEST(JinjaErrors, ValidTemplatesRenderWithoutError) {
  EXPECT_EQ(error_of("{% for m in messages %}{{ m.content }}{% endfor %}",
                     Dict{{{"messages", List{Value(Dict{{{"content", "hi"}}})}}}}),
            "");
}

}  // namespace
}  // namespace dsx::jinja
