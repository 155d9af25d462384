"""How well calibrate's rounds rank placements, against each other and
against the simulator, from the CSVs `placer calibrate -o` writes (and
benchmarks/results/calibration_*.csv, which add columns naming the run).

  python3 scripts/rounds_rank.py [--exclude COLUMN=VALUE]... CSV...

A run is one file and one value of every column calibrate does not write
(run, pin_cores, ...); --exclude leaves out the rows with that value. Per
run and model, as calibrate's summary prints them with several rounds:
Spearman's rho between every two rounds, the mean ("rounds"); between the
simulator (+ reference steps) and each round, the mean ("sim vs round");
and between the simulator and the median of the rounds ("sim vs
median"); and how much slower the placement simulated fastest measured
than the one measured fastest ("pick", as calibrate's "+ reference's
pick"; ties broken by name). Then per model the means over runs and how
many reach 0.9."""
import collections
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calibration_stats import spearman  # noqa: E402

WRITTEN = {"model", "placement", "measured_seconds", "simulated_seconds",
           "simulated_with_feedback_seconds", "measured_rounds_seconds"}


def main(argv):
    excluded, files = [], []
    i = 0
    while i < len(argv):
        if argv[i] == "--exclude":
            excluded.append(tuple(argv[i + 1].split("=", 1)))
            i += 2
        else:
            files.append(argv[i])
            i += 1
    if not files:
        sys.exit(__doc__)
    runs = collections.OrderedDict()
    for path in files:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if any(row.get(k) == v for k, v in excluded):
                    continue
                extra = tuple(f"{k}={v}" for k, v in row.items()
                              if k not in WRITTEN)
                key = (os.path.basename(path), extra, row["model"])
                runs.setdefault(key, []).append(row)
    per_model = collections.defaultdict(list)
    print("file\trun\tmodel\trounds\tsim vs round\tsim vs median\tpick")
    for (path, extra, model), rows in runs.items():
        sim = [float(r["simulated_with_feedback_seconds"]) for r in rows]
        rounds = [[float(t) for t in r["measured_rounds_seconds"].split(";")]
                  for r in rows]
        n = min(len(r) for r in rounds)
        if n < 2 or len(rows) < 3:
            continue
        between = statistics.mean(
            spearman([r[a] for r in rounds], [r[b] for r in rounds])
            for a in range(n) for b in range(a + 1, n))
        one = statistics.mean(spearman(sim, [r[k] for r in rounds])
                              for k in range(n))
        median = spearman(sim, [statistics.median(r) for r in rounds])
        measured = [float(r["measured_seconds"]) for r in rows]
        names = [r["placement"] for r in rows]
        pick = min(range(len(rows)), key=lambda i: (sim[i], names[i]))
        over = measured[pick] / min(measured) - 1
        per_model[model].append((between, one, median, over))
        print(f"{path}\t{' '.join(extra)}\t{model}\t{between:.3f}\t"
              f"{one:.3f}\t{median:.3f}\t{names[pick]} +{100 * over:.1f}%")
    print()
    print("model\truns\trounds\tsim vs round\tsim vs median\t"
          ">= 0.9: rounds / sim vs median\tsim vs round >= rounds\t"
          "pick: mean, worst")
    for model, v in per_model.items():
        means = [statistics.mean(x[k] for x in v) for k in range(4)]
        print(f"{model}\t{len(v)}\t{means[0]:.3f}\t{means[1]:.3f}\t"
              f"{means[2]:.3f}\t{sum(x[0] >= 0.9 for x in v)} / "
              f"{sum(x[2] >= 0.9 for x in v)}\t"
              f"{sum(x[1] >= x[0] for x in v)} of {len(v)}\t"
              f"+{100 * means[3]:.1f}%, +{100 * max(x[3] for x in v):.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
