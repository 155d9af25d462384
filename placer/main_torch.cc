// placer_torch: the placer commands that need LibTorch. `placer profile`,
// `run`, `calibrate`, `train` and `place --policy rl` exec this binary with
// their own arguments.
#include "placer/cli/cli_common.h"

int main(int argc, char** argv) {
  return placer::RunCli(argc, argv,
                        "placer_torch: LibTorch commands of placer "
                        "(run them as `placer train ...`).\n",
                        {{"profile", placer::ProfileCommand},
                         {"run", placer::RunCommand},
                         {"calibrate", placer::CalibrateCommand},
                         {"train", placer::TrainCommand},
                         {"place", placer::PlaceCommand},
                         {"worker", placer::WorkerCommand}});
}
