#include "graph/fused_region.h"

namespace placer {

bool IsFusedRegion(const Op& op) {
  return op.domain == kPlacerDomain && op.op_type == kFusedRegionType;
}

const Graph* RegionBody(const Op& op) {
  if (!IsFusedRegion(op)) return nullptr;
  const AttributeValue* body = op.FindAttribute("body");
  if (body == nullptr || body->kind != AttributeValue::Kind::kGraph) {
    return nullptr;
  }
  return body->graph.get();
}

}  // namespace placer
