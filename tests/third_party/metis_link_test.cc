#include <metis.h>

#include <vector>

#include "gtest/gtest.h"

namespace {

// Two triangles joined by one edge split into two parts along that edge.
TEST(MetisLinkTest, PartitionsTwoTriangles) {
  idx_t nvtxs = 6, ncon = 1, nparts = 2, objval = 0;
  std::vector<idx_t> xadj = {0, 2, 4, 7, 10, 12, 14};
  std::vector<idx_t> adjncy = {1, 2, 0, 2, 0, 1, 3, 2, 4, 5, 3, 5, 3, 4};
  std::vector<idx_t> part(nvtxs);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = 1;
  ASSERT_EQ(METIS_PartGraphRecursive(&nvtxs, &ncon, xadj.data(), adjncy.data(),
                                     nullptr, nullptr, nullptr, &nparts,
                                     nullptr, nullptr, options, &objval,
                                     part.data()),
            METIS_OK);
  EXPECT_EQ(objval, 1);
  EXPECT_EQ(part[0], part[1]);
  EXPECT_EQ(part[1], part[2]);
  EXPECT_EQ(part[3], part[4]);
  EXPECT_NE(part[0], part[3]);
}

}  // namespace
