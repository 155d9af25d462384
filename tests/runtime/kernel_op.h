// An Op for calling one LibTorch kernel directly in tests: inputs and
// outputs numbered in order, attributes set by kind.
#ifndef PLACER_TESTS_RUNTIME_KERNEL_OP_H_
#define PLACER_TESTS_RUNTIME_KERNEL_OP_H_

#include <string>
#include <vector>

#include "graph/graph.h"

namespace placer::test {

inline Op MakeOp(const std::string& type, int inputs, int outputs) {
  Op op;
  op.key = type;
  op.op_type = type;
  for (int i = 0; i < inputs; ++i) op.inputs.push_back(i);
  for (int i = 0; i < outputs; ++i) op.outputs.push_back(inputs + i);
  return op;
}

inline void SetInts(Op& op, const std::string& name, std::vector<int64_t> v) {
  op.attributes[name].kind = AttributeValue::Kind::kInts;
  op.attributes[name].ints = std::move(v);
}

inline void SetInt(Op& op, const std::string& name, int64_t v) {
  op.attributes[name].kind = AttributeValue::Kind::kInt;
  op.attributes[name].i = v;
}

inline void SetFloat(Op& op, const std::string& name, double v) {
  op.attributes[name].kind = AttributeValue::Kind::kFloat;
  op.attributes[name].f = v;
}

inline void SetString(Op& op, const std::string& name, const std::string& v) {
  op.attributes[name].kind = AttributeValue::Kind::kString;
  op.attributes[name].s = v;
}

}  // namespace placer::test

#endif  // PLACER_TESTS_RUNTIME_KERNEL_OP_H_
