#include "graph/einsum.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace placer {
namespace {

// Letter sizes and the broadcast ellipsis dims of a set of inputs.
struct Extents {
  std::map<char, int64_t> letters;
  std::vector<int64_t> ellipsis;
};

std::optional<Extents> Bind(const EinsumEquation& eq,
                            const std::vector<std::vector<int64_t>>& shapes) {
  if (shapes.size() != eq.inputs.size()) return std::nullopt;
  Extents e;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string& term = eq.inputs[i];
    const std::vector<int64_t>& shape = shapes[i];
    const size_t dot = term.find('.');
    const size_t letters = term.size() - (dot == std::string::npos ? 0 : 1);
    if (dot == std::string::npos ? shape.size() != letters
                                 : shape.size() < letters) {
      return std::nullopt;
    }
    const size_t ellipsis_rank = shape.size() - letters;
    size_t axis = 0;
    for (char c : term) {
      if (c == '.') {
        // Right-aligned broadcasting of every term's ellipsis dims.
        std::vector<int64_t> dims(shape.begin() + axis,
                                  shape.begin() + axis + ellipsis_rank);
        if (dims.size() > e.ellipsis.size()) {
          e.ellipsis.insert(e.ellipsis.begin(), dims.size() - e.ellipsis.size(),
                            1);
        }
        const size_t offset = e.ellipsis.size() - dims.size();
        for (size_t k = 0; k < dims.size(); ++k) {
          int64_t& o = e.ellipsis[offset + k];
          if (dims[k] == o || dims[k] == 1) continue;
          if (o != 1) return std::nullopt;
          o = dims[k];
        }
        axis += ellipsis_rank;
        continue;
      }
      auto [it, inserted] = e.letters.emplace(c, shape[axis]);
      if (!inserted && it->second != shape[axis]) {
        // A size-1 dim broadcasts against the letter's other sizes.
        if (it->second == 1) {
          it->second = shape[axis];
        } else if (shape[axis] != 1) {
          return std::nullopt;
        }
      }
      ++axis;
    }
  }
  return e;
}

}  // namespace

absl::StatusOr<EinsumEquation> ParseEinsum(absl::string_view equation) {
  std::string text = absl::StrReplaceAll(equation, {{" ", ""}, {"...", "."}});
  auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("einsum equation '", equation, "': ", why));
  };
  EinsumEquation eq;
  const size_t arrow = text.find("->");
  const std::string lhs = text.substr(0, arrow);
  for (absl::string_view term : absl::StrSplit(lhs, ',')) {
    eq.inputs.emplace_back(term);
  }
  for (const std::string& term : eq.inputs) {
    if (std::count(term.begin(), term.end(), '.') > 1) {
      return error("more than one ellipsis in a term");
    }
    for (char c : term) {
      if (c != '.' && !std::isalpha(static_cast<unsigned char>(c))) {
        return error(absl::StrCat("'", std::string(1, c), "' is not a letter"));
      }
    }
  }
  if (arrow != std::string::npos) {
    eq.output = text.substr(arrow + 2);
    for (char c : eq.output) {
      if (c != '.' && lhs.find(c) == std::string::npos) {
        return error(absl::StrCat("output letter '", std::string(1, c),
                                  "' is in no input"));
      }
    }
    return eq;
  }
  // Implicit output: the ellipsis, then the letters seen once, sorted.
  std::map<char, int> count;
  bool ellipsis = false;
  for (char c : lhs) {
    if (c == '.') ellipsis = true;
    if (std::isalpha(static_cast<unsigned char>(c))) ++count[c];
  }
  if (ellipsis) eq.output = ".";
  for (const auto& [c, n] : count) {
    if (n == 1) eq.output.push_back(c);
  }
  return eq;
}

std::optional<std::vector<int64_t>> EinsumOutputShape(
    const EinsumEquation& equation,
    const std::vector<std::vector<int64_t>>& shapes) {
  std::optional<Extents> e = Bind(equation, shapes);
  if (!e) return std::nullopt;
  std::vector<int64_t> out;
  for (char c : equation.output) {
    if (c == '.') {
      out.insert(out.end(), e->ellipsis.begin(), e->ellipsis.end());
    } else {
      out.push_back(e->letters.at(c));
    }
  }
  return out;
}

std::optional<double> EinsumPoints(
    const EinsumEquation& equation,
    const std::vector<std::vector<int64_t>>& shapes) {
  std::optional<Extents> e = Bind(equation, shapes);
  if (!e) return std::nullopt;
  double points = 1;
  for (const auto& [c, n] : e->letters) points *= static_cast<double>(n);
  for (int64_t d : e->ellipsis) points *= static_cast<double>(d);
  return points;
}

}  // namespace placer
