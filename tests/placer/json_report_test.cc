#include "placer/json_report.h"

#include "gtest/gtest.h"

namespace placer {
namespace {

TEST(JsonReportTest, KeysSortedAtEveryLevelOneLine) {
  google::protobuf::Struct s;
  auto& f = *s.mutable_fields();
  f["zeta"].set_number_value(1.5);
  f["alpha"].set_string_value("a \"quoted\" name");
  auto& inner = *f["middle"].mutable_struct_value()->mutable_fields();
  for (const char* key : {"/gpu:3", "/gpu:1", "/gpu:2", "/gpu:0"}) {
    inner[key].set_number_value(7);
  }
  auto* list = f["list"].mutable_list_value();
  list->add_values()->set_bool_value(true);
  list->add_values()->set_null_value(google::protobuf::NULL_VALUE);
  EXPECT_EQ(ReportJson(s),
            "{\"alpha\":\"a \\\"quoted\\\" name\",\"list\":[true,null],"
            "\"middle\":{\"/gpu:0\":7,\"/gpu:1\":7,\"/gpu:2\":7,\"/gpu:3\":7},"
            "\"zeta\":1.5}\n");
}

}  // namespace
}  // namespace placer
