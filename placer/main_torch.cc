// placer_torch: the placer commands that need LibTorch. `placer profile`
// execs this binary with its own arguments.
#include "placer/cli_common.h"

int main(int argc, char** argv) {
  return placer::RunCli(argc, argv,
                        "placer_torch: LibTorch commands of placer "
                        "(run them as `placer profile ...`).\n",
                        {{"profile", placer::ProfileCommand}, {"run", placer::RunCommand},
                         {"calibrate", placer::CalibrateCommand}});
}
