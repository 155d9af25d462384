// The preset clusters compiled in from profiles/clusters/*.pbtxt.
#ifndef PLACER_PROFILES_CLUSTER_PRESETS_H_
#define PLACER_PROFILES_CLUSTER_PRESETS_H_

#include <string>
#include <vector>

namespace placer {

struct ClusterPreset {
  const char* name;  // the file's base name
  const char* text;  // its protobuf text
};

const std::vector<ClusterPreset>& ClusterPresets();

}  // namespace placer

#endif  // PLACER_PROFILES_CLUSTER_PRESETS_H_
