#include "runtime/input_values.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/initial_values.h"
#include "runtime/torch_ops.h"

namespace placer {
namespace {

absl::Status Bad(absl::string_view entry, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--input-values '", entry, "': ", why,
                   " (expected NAME=range:LO:HI, NAME=value:V, NAME=mask or "
                   "NAME=file:PATH)"));
}

absl::StatusOr<std::vector<double>> ReadNumbers(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot read the file"));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<double> numbers;
  for (absl::string_view token : absl::StrSplit(
           text.str(), absl::ByAnyChar(" \t\r\n,"), absl::SkipEmpty())) {
    double x = 0;
    if (!absl::SimpleAtod(token, &x) || !std::isfinite(x)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": '", token, "' (value ", numbers.size() + 1,
                       ") is not a finite number"));
    }
    numbers.push_back(x);
  }
  return numbers;
}

}  // namespace

absl::StatusOr<std::pair<std::string, InputValues>> ParseInputValues(
    absl::string_view entry, const std::string& base_dir) {
  const size_t eq = entry.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return Bad(entry, "no NAME=");
  }
  const std::string name(entry.substr(0, eq));
  const absl::string_view spec = entry.substr(eq + 1);
  InputValues values;
  if (spec == "mask") {
    values.kind = InputValues::Kind::kMask;
  } else if (absl::StartsWith(spec, "value:")) {
    values.kind = InputValues::Kind::kConstant;
    if (!absl::SimpleAtod(spec.substr(6), &values.constant) ||
        !std::isfinite(values.constant)) {
      return Bad(entry, "the value is not a finite number");
    }
  } else if (absl::StartsWith(spec, "range:")) {
    values.kind = InputValues::Kind::kRange;
    std::vector<absl::string_view> bounds = absl::StrSplit(spec.substr(6), ':');
    if (bounds.size() != 2 || !absl::SimpleAtod(bounds[0], &values.low) ||
        !absl::SimpleAtod(bounds[1], &values.high) ||
        !std::isfinite(values.low) || !std::isfinite(values.high)) {
      return Bad(entry, "a range is range:LO:HI with two numbers");
    }
    if (!(values.low < values.high)) return Bad(entry, "LO must be below HI");
  } else if (absl::StartsWith(spec, "file:")) {
    values.kind = InputValues::Kind::kList;
    std::string path(spec.substr(5));
    if (path.empty()) return Bad(entry, "no PATH");
    if (path[0] != '/' && !base_dir.empty()) path = base_dir + "/" + path;
    absl::StatusOr<std::vector<double>> numbers = ReadNumbers(path);
    if (!numbers.ok()) return Bad(entry, numbers.status().message());
    values.list = *std::move(numbers);
    values.source = path;
  } else {
    return Bad(entry, "unknown kind of values");
  }
  return std::make_pair(name, std::move(values));
}

absl::StatusOr<torch::Tensor> MakeInputValues(const Tensor& input,
                                              const InputValues& values,
                                              int64_t index_bound,
                                              torch::Generator& gen) {
  const bool integer = !IsFloatingPoint(input.dtype);
  const torch::ScalarType type = ToTorchType(input.dtype);
  const auto options = torch::TensorOptions().dtype(type);
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input-values for graph input '", input.name, "' (",
                     DataTypeName(input.dtype), ", ", input.num_elements(),
                     " elements): ", why));
  };
  auto whole = [](double x) { return x == std::floor(x); };
  switch (values.kind) {
    case InputValues::Kind::kMask:
      return DrawMask(input.shape, type, gen);
    case InputValues::Kind::kConstant:
      if (integer && !whole(values.constant)) {
        return fail(absl::StrCat(values.constant, " is not an integer"));
      }
      if (integer && index_bound > 0 &&
          (values.constant < 0 || values.constant >= index_bound)) {
        return fail(absl::StrCat(values.constant, " indexes past the ",
                                 index_bound, " rows it selects from"));
      }
      return torch::full(input.shape, values.constant, options);
    case InputValues::Kind::kRange:
      if (!integer) {
        return values.low + (values.high - values.low) *
                                torch::rand(input.shape, gen, options);
      }
      if (!whole(values.low) || !whole(values.high)) {
        return fail("an integer input's range needs integer bounds");
      }
      if (index_bound > 0 && (values.low < 0 || values.high > index_bound)) {
        return fail(absl::StrCat("range [", values.low, ", ", values.high,
                                 ") indexes past the ", index_bound,
                                 " rows it selects from"));
      }
      return torch::randint(static_cast<int64_t>(values.low),
                            static_cast<int64_t>(values.high), input.shape, gen,
                            options);
    case InputValues::Kind::kList: {
      if (static_cast<int64_t>(values.list.size()) != input.num_elements()) {
        return fail(absl::StrCat(values.source, " holds ", values.list.size(),
                                 " values"));
      }
      for (size_t k = 0; k < values.list.size(); ++k) {
        const double x = values.list[k];
        if (integer &&
            (!whole(x) || (index_bound > 0 && (x < 0 || x >= index_bound)))) {
          return fail(absl::StrCat(
              values.source, ": value ", k + 1, " (", x, ") is not ",
              index_bound > 0
                  ? absl::StrCat("an integer in [0, ", index_bound, ")")
                  : std::string("an integer")));
        }
      }
      torch::Tensor t = torch::tensor(
          values.list, torch::TensorOptions().dtype(torch::kDouble));
      return t.reshape(input.shape).to(type);
    }
  }
  return fail("unknown kind of values");
}

}  // namespace placer
