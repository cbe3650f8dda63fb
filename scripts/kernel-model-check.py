#!/usr/bin/env python3
"""Measured CUDA kernel times against the performance model's predictions.

Joins per-kernel times measured on a GPU with what `llmc inspect ARTIFACT
--kernels --json` predicts for each launch, and prints one row per kernel:
its symbol, launches, measured and predicted microseconds per launch, the
ratio predicted / measured, the model's bound, and "outside 30%" when the
ratio is outside [0.7, 1.3]. Kernels measured without a prediction (no cost
model, not in the artifact, not run at that shape) are listed with "no
prediction" and why; kernels the model says run but that were not measured,
with "not measured".

  scripts/kernel-model-check.py --measured FILE
      (--predicted REPORT.json | --artifact DIR [--llmc PATH] [--decode B,C] [--prefill T])
      [--section decode|prefill|TEXT] [--shape NAME] [--markdown] [--fail-outside]
      [--step-us US]

--measured is one of (the format is recognised by its content):
  ncu text   the table of bench/data/*/ncu-per-kernel.txt: sections headed
             `===== decode step, ...` / `===== prefill of 512 tokens ...`,
             rows `SYMBOL n= 79 5.521 ms ( 35.3%) ...`; --section picks one
             (default decode: the first header that contains the word)
  ncu CSV    `ncu --csv --print-units base --metrics gpu__time_duration.sum`
             (one row per launch, columns "Kernel Name", "Metric Name",
             "Metric Unit", "Metric Value"): summed and counted per kernel;
             every launch counts, whichever step it ran in
  plain CSV  `symbol,launches,total_us` (a header line optional; # comments)

The predictions are those of the shape that --section names (the first
`decode ...` or `prefill ...` shape of the report), or --shape NAME. With
--artifact the script runs `LLMC inspect DIR --kernels --json --decode=B,C`
itself (LLMC: --llmc, default build/bin/llmc; llmc-rt has the same inspect),
with --prefill=T for a prefill section (T from the ncu text section header
`prefill of T tokens` when not given).

--step-us US is the wall time of one step of that shape measured without
the profiler (e.g. `llmc-rt bench --cuda-graphs`, 1e6 / tok/s at batch 1).
The script then prints the time between kernels: (US - the measured kernels'
time per step) / the step's launches, where the kernels' time per step is
their measured total scaled to the report's launches per step (ncu may have
timed a few steps, or a prefill token besides). That gap is what a step
costs beyond the kernels' own durations, which the model's per-launch
`fixed_s` does not include.

Exit status: 0 the table was printed; 1 some ratio is outside 30% and
--fail-outside was given; 2 bad input (a message names the file and line),
also when no measured kernel has a prediction (a different artifact?).
"""
import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOW, HIGH = 0.7, 1.3


class BadInput(Exception):
    """A message for stderr; exit 2."""


UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
         "s": 1e6, "second": 1e6}


def number(text, where):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        raise BadInput(f"{where}: {text!r} is not a number") from None


def kernel_symbol(name):
    """ncu's "Kernel Name" without a demangled signature: `void f<..>(..)` -> f."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    return re.split(r"[(<]", name, maxsplit=1)[0].strip()


# ---------------------------------------------------------------- measured

class Measured:
    def __init__(self, fmt, label):
        self.fmt = fmt          # "ncu text", "ncu CSV", "plain CSV"
        self.label = label      # what was picked (the section header), or ""
        self.kernels = {}       # symbol -> [launches, total microseconds]
        self.prefill_tokens = None

    def add(self, symbol, launches, total_us):
        k = self.kernels.setdefault(symbol, [0, 0.0])
        k[0] += launches
        k[1] += total_us


NCU_ROW = re.compile(r"^(?P<sym>\S+)\s+n=\s*(?P<n>[\d,]+)\s+(?P<t>[\d.,]+)\s*(?P<unit>ns|us|ms|s)\b")


def parse_ncu_text(path, lines, section):
    want = section.lower()
    m = None
    in_section = False
    seen = []
    for no, line in enumerate(lines, 1):
        text = line.strip()
        if text.startswith("====="):
            header = text.strip("= ").strip()
            seen.append(header)
            if m is not None:
                break  # the next section: done
            if want in header.lower():
                m = Measured("ncu text", header)
                t = re.search(r"prefill of ([\d,]+) tokens", header)
                if t:
                    m.prefill_tokens = int(t.group(1).replace(",", ""))
                in_section = True
            continue
        if not in_section or not text or text.startswith("#"):
            continue
        r = NCU_ROW.match(text)
        if not r:
            raise BadInput(f"{path}:{no}: not a kernel row `SYMBOL n= N TIME ms ...`: {text[:80]!r}")
        n = int(r.group("n").replace(",", ""))
        if n <= 0:
            raise BadInput(f"{path}:{no}: n={n}: a kernel row needs launches")
        m.add(r.group("sym"), n, number(r.group("t"), f"{path}:{no}") * UNITS[r.group("unit")])
    if m is None:
        raise BadInput(f"{path}: no section `===== ...{section}...` (sections: "
                       f"{'; '.join(seen) if seen else 'none'})")
    if not m.kernels:
        raise BadInput(f"{path}: section {m.label!r} has no kernel rows")
    return m


def ncu_csv_rows(path, lines, header_index, need):
    """(where, {column: field}) for each data row of an ncu CSV whose header
    is lines[header_index]; BadInput when a `need` column is missing or a
    row's field count differs from the header's."""
    header = next(csv.reader([lines[header_index]]))
    for name in need:
        if name not in header:
            raise BadInput(f"{path}:{header_index + 1}: the ncu CSV header has no {name!r} column")
    for no in range(header_index + 1, len(lines)):
        text = lines[no].strip()
        where = f"{path}:{no + 1}"
        # ncu's own messages (==PROF==, ==WARNING==) may share the log.
        if not text or text.startswith("=="):
            continue
        row = next(csv.reader([text]))
        if len(row) != len(header):
            raise BadInput(f"{where}: {len(row)} fields, the header has {len(header)}")
        yield where, dict(zip(header, row))


def parse_ncu_csv(path, lines, header_index):
    m = Measured("ncu CSV", "")
    for where, row in ncu_csv_rows(path, lines, header_index, ("Kernel Name", "Metric Value")):
        if row.get("Metric Name", "gpu__time_duration.sum") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "ns").strip()
        if unit not in UNITS:
            raise BadInput(f"{where}: unit {unit!r} (want one of {', '.join(UNITS)}; "
                           "ncu --print-units base)")
        value = number(row["Metric Value"], where)
        m.add(kernel_symbol(row["Kernel Name"]), 1, value * UNITS[unit])
    if not m.kernels:
        raise BadInput(f"{path}: no gpu__time_duration.sum rows after the header (line {header_index + 1})")
    return m


def parse_plain_csv(path, lines):
    m = Measured("plain CSV", "")
    for no, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        row = [f.strip() for f in next(csv.reader([text]))]
        if row[:3] == ["symbol", "launches", "total_us"]:
            continue
        if len(row) != 3:
            raise BadInput(f"{path}:{no}: want `symbol,launches,total_us`, got {len(row)} fields")
        try:
            n = int(row[1])
        except ValueError:
            raise BadInput(f"{path}:{no}: launches {row[1]!r} is not an integer") from None
        if n <= 0:
            raise BadInput(f"{path}:{no}: launches {n}: need at least one")
        m.add(row[0], n, number(row[2], f"{path}:{no}"))
    if not m.kernels:
        raise BadInput(f"{path}: no `symbol,launches,total_us` rows")
    return m


def read_measured(path, section):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None
    if any(l.lstrip().startswith("=====") for l in lines):
        return parse_ncu_text(path, lines, section)
    for i, l in enumerate(lines):
        if '"Kernel Name"' in l or l.startswith("Kernel Name,") or ",Kernel Name," in l:
            return parse_ncu_csv(path, lines, i)
    return parse_plain_csv(path, lines)


# --------------------------------------------------------------- predicted

class Predicted:
    def __init__(self, shape, device):
        self.shape = shape
        self.device = device
        self.by_symbol = {}  # symbol -> dict(status, seconds, bound)
        self.note = ""       # why instruction counts may be missing
        self.step_launches = 0  # launches of one step at `shape` (report "steps")


def run_inspect(args, prefill_tokens):
    cmd = [args.llmc, "inspect", args.artifact, "--kernels", "--json", f"--decode={args.decode}"]
    if prefill_tokens:
        cmd.append(f"--prefill={prefill_tokens}")
    if args.device:
        cmd.append(f"--device={args.device}")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise BadInput(f"{args.llmc}: {e.strerror}") from None
    if r.returncode != 0:
        raise BadInput(f"`{' '.join(cmd)}` failed (exit {r.returncode}): {r.stderr.strip()[-500:]}")
    return "`" + " ".join(cmd) + "`", r.stdout


def read_predicted(name, text, kind, shape_name):
    try:
        report = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{name}:{e.lineno}: not JSON ({e.msg})") from None
    if not isinstance(report, dict) or "kernels" not in report or "shapes" not in report:
        raise BadInput(f"{name}: not an `inspect --kernels --json` report (no \"kernels\"/\"shapes\")")
    shapes = [s.get("name", "") for s in report["shapes"]]
    if shape_name:
        if shape_name not in shapes:
            raise BadInput(f"{name}: no shape {shape_name!r} (shapes: {', '.join(shapes) or 'none'})")
        shape = shape_name
    else:
        matching = [s for s in shapes if s.split(" ")[0] == kind]
        if kind in ("decode", "prefill") and not matching:
            hint = " (inspect --prefill=T)" if kind == "prefill" else ""
            raise BadInput(f"{name}: no {kind} shape{hint} (shapes: {', '.join(shapes) or 'none'})")
        shape = (matching or shapes or [""])[0]
        if not shape:
            raise BadInput(f"{name}: the report has no shapes")
    for step in report.get("steps", []):
        if step.get("shape") == shape and step.get("error"):
            raise BadInput(f"{name}: shape {shape!r}: {step['error']}")
    p = Predicted(shape, (report.get("device") or {}).get("name", "?"))
    for step in report.get("steps", []):
        if step.get("shape") == shape and isinstance(step.get("launches"), int):
            p.step_launches = step["launches"]
    tools = report.get("tools") or {}
    missing = [t for t in ("ptxas", "disassembler") if t in tools and not tools[t]]
    if missing:
        p.note = (f"note: inspect found no {' and no '.join(missing)}: no SASS, so no instruction "
                  "counts; the predictions leave out the issue-bound term")
    try:
        for k in report["kernels"]:
            for launch in k["launches"]:
                sym = launch["symbol"]
                at = next((s for s in launch.get("shapes", []) if s.get("shape") == shape), None)
                if at is None or not at.get("runs"):
                    entry = {"status": f"does not run at {shape}"}
                elif at.get("prediction"):
                    pr = at["prediction"]
                    entry = {"status": "ok", "seconds": float(pr["seconds"]), "bound": pr.get("bound", "")}
                else:
                    entry = {"status": at.get("note") or "no cost model"}
                old = p.by_symbol.get(sym)
                # A symbol twice (never so far): the entry that runs wins.
                if old is None or (old["status"] != "ok" and entry["status"] == "ok"):
                    p.by_symbol[sym] = entry
    except (KeyError, TypeError, ValueError) as e:
        raise BadInput(f"{name}: a kernel launch without {e} in the report") from None
    return p


# -------------------------------------------------------------------- join

def join(measured, predicted):
    rows = []
    for sym, (n, total_us) in sorted(measured.kernels.items(), key=lambda kv: -kv[1][1]):
        row = {"symbol": sym, "launches": n, "measured_us": total_us / n, "total_us": total_us,
               "predicted_us": None, "ratio": None, "bound": "", "note": ""}
        e = predicted.by_symbol.get(sym)
        if e is None:
            row["note"] = "no prediction: not in the artifact"
        elif e["status"] != "ok":
            row["note"] = f"no prediction: {e['status']}"
        else:
            row["predicted_us"] = e["seconds"] * 1e6
            row["bound"] = e["bound"]
            row["ratio"] = row["predicted_us"] / row["measured_us"] if row["measured_us"] > 0 else None
            if row["ratio"] is None or not LOW <= row["ratio"] <= HIGH:
                row["note"] = "outside 30%"
        rows.append(row)
    for sym, e in sorted(predicted.by_symbol.items()):
        if sym not in measured.kernels and e["status"] == "ok":
            rows.append({"symbol": sym, "launches": 0, "measured_us": None, "total_us": None,
                         "predicted_us": e["seconds"] * 1e6, "ratio": None, "bound": e["bound"],
                         "note": "not measured"})
    return rows


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def render(rows, measured, predicted, source, markdown):
    joined = [r for r in rows if r["ratio"] is not None]
    meas_total = sum(r["total_us"] for r in joined)
    pred_total = sum(r["predicted_us"] * r["launches"] for r in joined)
    out = []
    what = f"{measured.fmt}" + (f", section \"{measured.label}\"" if measured.label else "")
    out.append(f"measured: {source[0]} ({what}); predicted: {source[1]}, shape \"{predicted.shape}\" "
               f"on {predicted.device}")
    head = ["kernel", "launches", "measured us/launch", "predicted us/launch", "pred/meas", "bound", "note"]
    body = [[r["symbol"], str(r["launches"]), fmt(r["measured_us"], ".2f"), fmt(r["predicted_us"], ".2f"),
             fmt(r["ratio"], ".2f"), r["bound"], r["note"]] for r in rows]
    if joined:
        body.append(["total (kernels with a prediction)", str(sum(r["launches"] for r in joined)),
                     f"{meas_total:.1f}", f"{pred_total:.1f}",
                     f"{pred_total / meas_total:.2f}" if meas_total > 0 else "-", "",
                     "microseconds in all, not per launch"])
    if markdown:
        out.append("")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---", "---:", "---:", "---:", "---:", "---", "---"]) + "|")
        for b in body:
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in b) + " |")
    else:
        right = {1, 2, 3, 4}
        widths = [max(len(head[i]), *(len(b[i]) for b in body)) for i in range(len(head))]
        line = lambda cells: "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i])
                                       for i, c in enumerate(cells)).rstrip()
        out.append(line(head))
        out.extend(line(b) for b in body)
    outside = sum(1 for r in rows if r["note"] == "outside 30%")
    out.append("")
    out.append(f"{len(joined)} kernel(s) with a prediction, {outside} outside 30% "
               f"(ratio outside [{LOW}, {HIGH}]); "
               f"{sum(1 for r in rows if r['note'].startswith('no prediction'))} without a prediction")
    if predicted.note:
        out.append(predicted.note)
    return "\n".join(out), outside, len(joined)


def launch_gap(measured, predicted, step_us):
    """The line on the time between kernels (--step-us)."""
    launches = sum(n for n, _ in measured.kernels.values())
    total_us = sum(t for _, t in measured.kernels.values())
    per_step = predicted.step_launches
    if not per_step or not launches:
        raise BadInput(f"--step-us needs the report's launches per step at {predicted.shape!r} "
                       "and measured launches")
    kernels_us = total_us * per_step / launches
    gap = (step_us - kernels_us) / per_step
    return (f"between kernels: a step of {step_us:.1f} us (--step-us) against {kernels_us:.1f} us of "
            f"kernels per step ({total_us:.1f} us over {launches} measured launches, scaled to the "
            f"step's {per_step}): {gap:.2f} us per launch")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--measured", required=True, help="ncu text table, ncu CSV, or symbol,launches,total_us")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--predicted", help="the output of `llmc inspect ARTIFACT --kernels --json`")
    src.add_argument("--artifact", help="run inspect on this artifact")
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build", "bin", "llmc"),
                    help="llmc or llmc-rt to run inspect with (default: build/bin/llmc)")
    ap.add_argument("--decode", default="1,512", help="with --artifact: inspect --decode=B,C")
    ap.add_argument("--prefill", type=int, default=0,
                    help="with --artifact: inspect --prefill=T (default for a prefill section: its T)")
    ap.add_argument("--device", default="", help="with --artifact: inspect --device=D")
    ap.add_argument("--section", default="decode",
                    help="decode|prefill (or any text of an ncu text section header): which measured "
                         "section and which predicted shape (default decode)")
    ap.add_argument("--shape", default="", help="the predicted shape by name, e.g. 'decode 1x4'")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--fail-outside", action="store_true", help="exit 1 when a ratio is outside 30%%")
    ap.add_argument("--step-us", type=float, default=0.0,
                    help="a step's measured wall time (us): print the time between kernels")
    args = ap.parse_args(argv)
    kind = args.section.lower().split()[0] if args.section.strip() else "decode"
    try:
        measured = read_measured(args.measured, args.section)
        if args.predicted:
            try:
                with open(args.predicted, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise BadInput(f"{args.predicted}: {e.strerror}") from None
            name = args.predicted
        else:
            t = args.prefill or (measured.prefill_tokens if kind == "prefill" else 0)
            if kind == "prefill" and not t:
                raise BadInput("a prefill section with --artifact needs --prefill=T")
            name, text = run_inspect(args, t)
        predicted = read_predicted(name, text, kind, args.shape)
        rows = join(measured, predicted)
        table, outside, joined = render(rows, measured, predicted, (args.measured, name), args.markdown)
        if args.step_us < 0:
            raise BadInput(f"--step-us {args.step_us}: a step takes a positive time")
        if args.step_us > 0:
            table += "\n" + launch_gap(measured, predicted, args.step_us)
    except BadInput as e:
        print(f"kernel-model-check: {e}", file=sys.stderr)
        return 2
    print(table)
    if joined == 0:
        print(f"kernel-model-check: no measured kernel has a prediction at {predicted.shape!r}: "
              "were they measured on this artifact?", file=sys.stderr)
        return 2
    return 1 if outside and args.fail_outside else 0


if __name__ == "__main__":
    sys.exit(main())
