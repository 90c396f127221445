"""bench/compile_time.sh's measurements (its header says what and why): compiles the
generated translation units (compile_time_sources.py) one at a time, writes the JSON and
prints the table."""
import argparse, concurrent.futures, csv, fnmatch, json, os, re, shlex, shutil, subprocess, sys, tempfile, time

import compile_time_sources

sys.stdout.reconfigure(line_buffering=True)

root = os.environ["ET_CT_ROOT"]
cxx, nvcc = os.environ["ET_CT_CXX"], os.environ["ET_CT_NVCC"]
nice = shlex.split(os.environ["ET_CT_NICE"])
eigen = []
for flag in shlex.split(os.environ["ET_CT_EIGEN"]):
    eigen += ["-isystem", flag[2:]] if flag.startswith("-I") else [flag]
core_header = os.environ.get("ET_CORE_HEADER", "et/core.hpp")
timeout_s = float(os.environ.get("COMPILE_TIMEOUT", "120"))

# ET_NO_CBLAS, ET_NO_DNNL: the CPU libraries' headers are not what these measure (and a file
# compiled without either macro warns); the figures stay comparable with the earlier ones.
CXX_FLAGS = ["-std=c++20", "-O3", "-march=x86-64-v3", "-fopenmp", "-DET_WITH_CUDA=1", "-DET_NO_CBLAS", "-DET_NO_DNNL",
             f"-I{root}/include",
             f"-I{root}/kernels", *eigen, "-isystem", os.environ["ET_CT_CUDA_INCLUDE"]]
NVCC_FLAGS = ["-std=c++20", "-O3", "-arch=sm_90", "--expt-relaxed-constexpr", "-Xcompiler=-fopenmp",
              "-DET_WITH_CUDA=1", "-DET_WITH_CUDNN=1", "-DET_NO_CBLAS", "-DET_NO_DNNL", f"-I{root}/include", f"-I{root}/kernels", *eigen]
COMPILERS = {"nvcc": "nvcc", "gxx": "g++"}
DEPTHS = range(1, 7)
DEEP = (31, 63)
MIX_CASES = ("cpu_plus_cuda", "cuda0_plus_cuda1", "assign_cuda_to_cpu", "device_mix_in_function",
             "matmul_devices", "conv2d_devices")
TARGETS = [  # (name, measurement id, kind, goal): kind "ratio" (over the hand kernel) or "seconds"
    ("depth-6 shared form, nvcc", "shared-6-nvcc", "ratio", 4.0),
    ("50 distinct expressions (core), nvcc", "fifty-core-nvcc", "ratio", 7.0),
    ("31-level chain, nvcc", "chain-31-nvcc", "ratio", 6.0),
    ("core one-expression .cu, nvcc", "one-core-nvcc", "ratio", 2.0),
    ("63-level chain, g++", "chain-63-gxx", "seconds", 10.0),
    ("63-level chain, nvcc", "chain-63-nvcc", "seconds", 30.0),
]
# Against Thrust, the lightest widely used way to write the same fused expressions (CPU
# seconds over Thrust's, same compiler and run): (name, etensor's id, Thrust's id, goal); the
# per-expression row divides (50 - 1 expressions) / 49 of each.
THRUST_TARGETS = [
    ("one expression (core) / Thrust, nvcc", "one-core-nvcc", "thrust-1-nvcc", 1.0),
    ("ten expressions (core) / Thrust, nvcc", "ten-core-nvcc", "thrust-10-nvcc", 1.5),
    ("per extra expression / Thrust, nvcc", "fifty-core-nvcc", "thrust-50-nvcc", 2.0),
]
DIAG_GOAL = 10

# ---- the measurements -----------------------------------------------------------------
# id -> dict(group, compiler, source name, what, depth series key)
def measurements():
    m = {}
    def add(id_, group, compiler, source, what, series=None, depth=None):
        m[id_] = dict(id=id_, group=group, compiler=compiler, source=source, what=what, series=series, depth=depth)
    add("hand-nvcc", "hand", "nvcc", "hand.cu", "hand-written CUDA kernel, depth 6, and its launch")
    add("hand-gxx", "hand", "gxx", "hand_omp.cpp", "hand-written OpenMP loop, depth 6")
    for form in ("shared", "chain"):
        for c in COMPILERS:
            for d in DEPTHS:
                add(f"{form}-{d}-{c}", form, c, f"{form}{d}", f"{form} form, depth {d} ({core_header})",
                    series=(form, c), depth=d)
    for c in COMPILERS:
        for d in DEEP:
            add(f"chain-{d}-{c}", "deep", c, f"chain{d}", f"chain form, {d} levels ({core_header})",
                series=("chain", c), depth=d)
    for c in COMPILERS:
        add(f"fifty-core-{c}", "fifty", c, "fifty_core", f"50 distinct expressions ({core_header})")
    add("one-core-gxx", "fifty", "gxx", "one_core", f"one-expression baseline ({core_header})")
    add("one-core-nvcc", "core", "nvcc", "one_core", f"one-expression baseline .cu ({core_header})")
    add("ten-core-nvcc", "thrust", "nvcc", "ten_core", f"10 distinct expressions ({core_header})")
    # The same TUs with recording compiled out: what autograd costs a file of expressions.
    for count, source in ((1, "one_core"), (10, "ten_core"), (50, "fifty_core")):
        add(f"{source.split('_')[0]}-noautograd-nvcc", "noautograd", "nvcc", source,
            f"{count} distinct expression{'s' if count > 1 else ''} ({core_header}), -DET_NO_AUTOGRAD")
    add("empty-core-nvcc", "floor", "nvcc", "empty_core", f"{core_header} alone, no expression")
    add("empty-thrust-nvcc", "floor", "nvcc", "empty_thrust", "Thrust's headers alone (device_vector, zip_iterator, transform)")
    for count in (1, 10, 50):
        add(f"thrust-{count}-nvcc", "thrust", "nvcc", f"thrust{count}",
            f"{count} distinct expression{'s' if count > 1 else ''} with Thrust (thrust::transform, zip iterator)")
    for c in COMPILERS:
        add(f"fifty-et-{c}", "et", c, "fifty_et", "50 distinct expressions (et/et.hpp)")
        add(f"one-et-{c}", "et", c, "one_et", "one-expression baseline (et/et.hpp)")
    for case in MIX_CASES:
        for c in COMPILERS:
            add(f"diag-{case}-{c}", "diag", c, case, f"tests/compile_fail/{case}.cpp -DET_FAIL")
    return m

ALL = measurements()
GROUPS = list(dict.fromkeys(v["group"] for v in ALL.values()))
QUICK = ["hand-nvcc", "hand-gxx", "shared-6-nvcc", "shared-6-gxx", "one-core-nvcc"]

parser = argparse.ArgumentParser(prog="bench/compile_time.sh", description="compile-time regression benchmark")
parser.add_argument("--json", help="output JSON path")
parser.add_argument("--quick", action="store_true", help="only: " + ", ".join(QUICK))
parser.add_argument("--only", help="comma-separated groups (" + ", ".join(GROUPS) + "), ids or shell patterns")
parser.add_argument("--list", action="store_true", help="list the measurement ids and exit")
parser.add_argument("--jobs", type=int, default=1,
                    help="compiles at once (default 1; more only on a machine with that many idle cores)")
args = parser.parse_args()
if args.list:
    for v in ALL.values():
        print(f"{v['id']:<34} {v['group']:<7} {v['what']}")
    sys.exit(0)
partial = bool(args.quick or args.only)
selected = list(ALL)
if args.quick:
    selected = [i for i in selected if i in QUICK]
if args.only:
    patterns = [p.strip() for p in args.only.split(",") if p.strip()]
    chosen = [i for i in selected if any(ALL[i]["group"] == p or fnmatch.fnmatchcase(i, p) for p in patterns)]
    unmatched = [p for p in patterns if not any(ALL[i]["group"] == p or fnmatch.fnmatchcase(i, p) for i in ALL)]
    if unmatched or not chosen:
        parser.error(f"--only {args.only}: nothing matches {', '.join(unmatched) or 'it'} (see --list)")
    selected = chosen
json_path = args.json or (os.path.join(tempfile.gettempdir(), "et-compile_time.partial.json") if partial
                          else os.path.join(root, "bench", "results", "compile_time.json"))

# ---- the generated translation units ---------------------------------------------------
work = tempfile.mkdtemp(prefix="et-compile-time.")
compile_time_sources.write_all(work, core_header, DEPTHS, DEEP)


def command(m):
    src = m["source"]
    if m["group"] == "diag":
        path = os.path.join(root, "tests", "compile_fail", f"{src}.cpp")
        if m["compiler"] == "nvcc":
            return [nvcc, *NVCC_FLAGS, "-DET_FAIL", "-x", "cu", "-c", path, "-o", os.devnull]
        return [cxx, *CXX_FLAGS, "-DET_FAIL", "-fsyntax-only", path]
    if m["compiler"] == "nvcc":
        src = src if src.endswith(".cu") else f"{src}.cu"
        extra = ["-DET_NO_AUTOGRAD"] if m["group"] == "noautograd" else []
        return [nvcc, *NVCC_FLAGS, *extra, "-time", phases_file(m), "-c", os.path.join(work, src),
                "-o", os.path.join(work, f"{m['id']}.o")]
    src = src if "." in src else f"{src}.cpp"
    return [cxx, *CXX_FLAGS, "-c", os.path.join(work, src), "-o", os.path.join(work, f"{m['id']}.o")]

# ---- timing ------------------------------------------------------------------------------
def phases_file(m):
    return os.path.join(work, f"{m['id']}.phases.csv")

def phases(m):
    """nvcc's own account (-time) of where one compile's wall time went: seconds per phase
    (cudafe++: the host/device split; cicc and ptxas: device code; gcc (compiling): the host
    code), summed over the phases of the same name."""
    try:
        rows = list(csv.reader(open(phases_file(m))))
    except OSError:
        return None
    out = {}
    for row in rows[1:]:
        if len(row) >= 8 and row[1].strip():
            try:
                out[row[1].strip()] = round(out.get(row[1].strip(), 0) + float(row[6]) / 1000, 2)
            except ValueError:
                pass
    return out or None

def clean(text):
    return text.replace(work + "/", "<tmp>/").replace(work, "<tmp>").replace(root + "/", "")

ERROR_LINE = re.compile(r"(:\d+:(\d+:)? |\(\d+\): )(fatal )?error")

def diagnostics(text):
    lines = [l for l in clean(text).splitlines() if l.strip()]
    errors = [l for l in lines if ERROR_LINE.search(l)]
    return {"lines": len(lines), "error_lines": len(errors), "first_error": errors[0] if errors else None}

def timed(m):
    """Runs one compile under nice and timeout; returns its record. The CPU seconds and peak
    memory are the kernel's account of the compiler and every process it waited for (wait4)."""
    argv = [*nice, "timeout", "-k", "10", f"{timeout_s:g}", *command(m)]
    if args.jobs == 1:
        print(f"compile_time: {m['id']} ...", end="", file=sys.stderr, flush=True)
    started = time.monotonic()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=work)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read().decode(errors="replace")
    wall = time.monotonic() - started
    record = {"id": m["id"], "group": m["group"], "compiler": COMPILERS[m["compiler"]], "what": m["what"]}
    if m["depth"] is not None:
        record["depth"] = m["depth"]
    cpu, rss_mib = round(usage.ru_utime + usage.ru_stime, 2), round(usage.ru_maxrss / 1024, 1)
    if proc.returncode in (124, 137):
        record.update(status="timeout", cpu_s=None, timeout_s=timeout_s)
        print(f"{'' if args.jobs == 1 else 'compile_time: ' + m['id'] + ':'} timed out after {timeout_s:g} s",
              file=sys.stderr)
        return record
    record.update(cpu_s=cpu, max_rss_mib=rss_mib)
    if m["compiler"] == "nvcc" and m["group"] != "diag" and phases(m):
        record["phases_wall_s"] = phases(m)
    if m["group"] == "diag":
        record["diagnostics"] = diagnostics(output)
        record["status"] = "refused" if proc.returncode != 0 else "COMPILED"
    else:
        record["status"] = "ok" if proc.returncode == 0 else "failed"
        if proc.returncode != 0:
            record["diagnostics"] = diagnostics(output)
            record["log_tail"] = clean(output).strip().splitlines()[-15:]
    print(f"{'' if args.jobs == 1 else 'compile_time: ' + m['id'] + ': '}{record['status']}, {cpu} s CPU "
          f"({wall:.1f} s wall)", file=sys.stderr)
    if record["status"] in ("failed", "COMPILED"):
        print(clean(output)[-3000:], file=sys.stderr)
    return record

def git(*argv):
    try:
        return subprocess.run(["git", "-C", root, *argv], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None

def version(argv, pattern=None):
    try:
        out = subprocess.run(argv, capture_output=True, text=True).stdout
    except OSError:
        return None
    if pattern:
        found = re.search(pattern, out)
        return found.group(1) if found else None
    return out.splitlines()[0] if out else None

load_before = open("/proc/loadavg").read().split()[:3]
started = time.time()
results = {}
if args.jobs > 1:
    # In parallel, every compile runs: a deeper depth is not skipped when a shallower one of the
    # same form timed out (each has its own timeout). CPU seconds are each compiler's own.
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for mid, record in zip(selected, pool.map(lambda mid: timed(ALL[mid]), selected)):
            results[mid] = record
else:
    timed_out_series = {}
    for mid in selected:
        m = ALL[mid]
        series = m["series"]
        if series in timed_out_series and m["depth"] > timed_out_series[series]:
            results[mid] = {"id": mid, "group": m["group"], "compiler": COMPILERS[m["compiler"]], "what": m["what"],
                            "depth": m["depth"], "status": "timeout", "cpu_s": None, "timeout_s": timeout_s,
                            "not_run": f"depth {timed_out_series[series]} of the same form and compiler timed out"}
            print(f"compile_time: {mid}: not run, counted as a timeout (depth {timed_out_series[series]} timed out)",
                  file=sys.stderr)
            continue
        results[mid] = timed(m)
        if series and results[mid]["status"] == "timeout":
            timed_out_series.setdefault(series, m["depth"])
load_after = open("/proc/loadavg").read().split()[:3]
shutil.rmtree(work, ignore_errors=True)

# ---- ratios, targets, JSON ---------------------------------------------------------------
def hand_of(compiler):
    r = results.get("hand-nvcc" if compiler == "nvcc" else "hand-gxx")
    return r["cpu_s"] if r and r["status"] == "ok" else None

for r in results.values():
    if r["group"] not in ("hand", "diag"):
        hand = hand_of(r["compiler"])
        r["ratio_to_hand"] = round(r["cpu_s"] / hand, 2) if r.get("cpu_s") and hand and r["status"] == "ok" else None

targets = []
for name, mid, kind, goal in TARGETS:
    r = results.get(mid)
    value, met, note = None, None, ""
    if r is None:
        note = "not measured"
    elif r["status"] == "timeout":
        met, note = False, f"timed out (> {timeout_s:g} s)"
    elif r["status"] != "ok":
        met, note = False, r["status"]
    else:
        value = r["cpu_s"] if kind == "seconds" else r.get("ratio_to_hand")
        met = None if value is None else value <= goal
        note = "" if value is not None else "no hand-kernel time to divide by"
    targets.append({"target": name, "id": mid, "kind": kind, "goal": goal, "value": value, "met": met, "note": note,
                    "cpu_s": r.get("cpu_s") if r else None})
def ok_cpu(mid):
    r = results.get(mid)
    return r["cpu_s"] if r and r["status"] == "ok" and r.get("cpu_s") else None

for name, mid, peer, goal in THRUST_TARGETS:
    ours, theirs = ok_cpu(mid), ok_cpu(peer)
    if mid.startswith("fifty-"):  # the cost of one more expression: (50 - 1) / 49 of each
        one_ours, one_theirs = ok_cpu("one-core-nvcc"), ok_cpu("thrust-1-nvcc")
        ours = (ours - one_ours) / 49 if ours and one_ours else None
        theirs = (theirs - one_theirs) / 49 if theirs and one_theirs else None
    value = round(ours / theirs, 2) if ours and theirs and theirs > 0 else None
    targets.append({"target": name, "id": mid, "peer": peer, "kind": "thrust", "goal": goal, "value": value,
                    "met": None if value is None else value <= goal,
                    "note": "" if value is not None else "not measured (both sides needed)",
                    "cpu_s": round(ours, 3) if ours else None, "peer_cpu_s": round(theirs, 3) if theirs else None})
for compiler in ("g++", "nvcc"):
    cases = [r for r in results.values() if r["group"] == "diag" and r["compiler"] == compiler]
    value = max((r["diagnostics"]["lines"] for r in cases if "diagnostics" in r), default=None)
    met = None if not cases else (False if any(r["status"] != "refused" for r in cases) else value <= DIAG_GOAL)
    missing = len(MIX_CASES) - len(cases)
    targets.append({"target": f"device-mix diagnostics, {compiler}", "id": f"diag-*-{'nvcc' if compiler == 'nvcc' else 'gxx'}",
                    "kind": "lines", "goal": DIAG_GOAL, "value": value, "met": met,
                    "note": (f"most lines of {len(cases)} case(s)" + (f"; {missing} not measured" if missing else "")
                             if cases else "not measured")})

def legacy(compiler):
    c = "nvcc" if compiler == "nvcc" else "gxx"
    one, fifty = results.get(f"one-et-{c}"), results.get(f"fifty-et-{c}")
    if not (one and fifty and one["status"] == fifty["status"] == "ok"):
        return None
    return {"header": "et/et.hpp", "baseline_s": one["cpu_s"], "fifty_s": fifty["cpu_s"],
            "per_expression_s": round((fifty["cpu_s"] - one["cpu_s"]) / 49, 3), "max_rss_mib": fifty["max_rss_mib"]}

def diag_summary():
    out = {"source": "tests/compile_fail/<case>.cpp -DET_FAIL", "cases": {}}
    for case in MIX_CASES:
        for compiler, c in (("g++", "gxx"), ("nvcc", "nvcc")):
            r = results.get(f"diag-{case}-{c}")
            if r:
                out["cases"].setdefault(case, {})[compiler] = dict(r.get("diagnostics", {}), status=r["status"])
    for compiler in ("g++", "nvcc"):  # the fields older readers take: the cpu_plus_cuda case
        if compiler in out["cases"].get("cpu_plus_cuda", {}):
            out[compiler] = out["cases"]["cpu_plus_cuda"][compiler]
        lines = [v[compiler]["lines"] for v in out["cases"].values() if compiler in v and "lines" in v[compiler]]
        if lines:
            out.setdefault("max_lines", {})[compiler] = max(lines)
    return out

# Where one more expression goes: (50 expressions - 1) / 49, CPU seconds and nvcc's phases.
PER_EXPRESSION = (("etensor", "one-core-nvcc", "fifty-core-nvcc"),
                  ("etensor, ET_NO_AUTOGRAD", "one-noautograd-nvcc", "fifty-noautograd-nvcc"),
                  ("Thrust", "thrust-1-nvcc", "thrust-50-nvcc"))
per_expression = {}
for name, one_id, fifty_id in PER_EXPRESSION:
    one, fifty = ok_cpu(one_id), ok_cpu(fifty_id)
    if one and fifty:
        entry = {"cpu_s": round((fifty - one) / 49, 3), "phases_wall_s": {}}
        p1, p50 = results[one_id].get("phases_wall_s") or {}, results[fifty_id].get("phases_wall_s") or {}
        for phase in p50:
            entry["phases_wall_s"][phase] = round((p50[phase] - p1.get(phase, 0)) / 49, 3)
        per_expression[name] = entry

commit = git("rev-parse", "--short", "HEAD")
dirty = git("status", "--porcelain")
result = {
    "benchmark": "compile-time",
    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    "git": {"commit": commit, "changed_paths": len(dirty.splitlines()) if dirty is not None else None},
    "partial": partial,
    "selection": "quick" if args.quick else (args.only or "all"),
    "machine": {"cores": os.cpu_count(), "load_average_before": " ".join(load_before),
                "load_average_after": " ".join(load_after), "nice": " ".join(nice), "jobs": args.jobs,
                "minutes": round((time.time() - started) / 60, 1)},
    "compilers": {"g++": version([cxx, "--version"]),
                  "nvcc": version([nvcc, "--version"], r"release ([0-9.]+)"),
                  "nvcc_full": version([nvcc, "--version"], r"(V[0-9.]+)")},
    "flags": {"g++": " ".join(clean(f) for f in CXX_FLAGS), "nvcc": " ".join(clean(f) for f in NVCC_FLAGS)},
    "core_header": core_header,
    "compile_timeout_s": timeout_s,
    "time_measure": "CPU seconds: user + sys of the compiler and its children (wait4's rusage)",
    "reference": {"nvcc": "hand-nvcc", "g++": "hand-gxx"},
    "measurements": results,
    "targets": targets,
    # The fields scripts/bench-all read before the regression benchmark (et/et.hpp, 50 expressions).
    "expressions": 50,
    "expression_shape": "f(x * c + y) op g(w) * d: 6 operations, f and g from 10 functions, op from + - * /",
    "device_mix_diagnostics": diag_summary(),
    "per_extra_expression": per_expression,
}
for compiler in ("g++", "nvcc"):
    if legacy(compiler):
        result[compiler] = legacy(compiler)
os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
with open(json_path, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")

# ---- the table -----------------------------------------------------------------------------
def fmt(v, spec):
    return "-" if v is None else format(v, spec)

print(f"\ncompile time, CPU seconds (user + sys), core header <{core_header}>, timeout {timeout_s:g} s per compile")
print(f"{'id':<34} {'compiler':<5} {'status':<8} {'CPU s':>8} {'x hand':>7} {'MiB':>7}  what")
for r in results.values():
    status = r["status"] + ("*" if r.get("not_run") else "")
    cells = fmt(r.get("cpu_s"), ".2f") if r["status"] != "timeout" else f">{timeout_s:g}"
    extra = ""
    if "diagnostics" in r:
        d = r["diagnostics"]
        extra = f"; {d['lines']} lines, {d['error_lines']} error line(s)"
    print(f"{r['id']:<34} {r['compiler']:<5} {status:<8} {cells:>8} {fmt(r.get('ratio_to_hand'), '.2f'):>7} "
          f"{fmt(r.get('max_rss_mib'), '.0f'):>7}  {r['what']}{extra}")
if any(r.get("not_run") for r in results.values()):
    print("  *: not run; a shallower depth of the same form and compiler timed out")
for compiler in ("g++", "nvcc"):
    t = legacy(compiler)
    if t:
        print(f"{compiler:<5} 50 expressions with et/et.hpp: {t['fifty_s']:.1f} s (one: {t['baseline_s']:.1f} s, "
              f"{t['per_expression_s']:.2f} s per extra expression, {t['max_rss_mib']:.0f} MiB)")
if per_expression:
    print("\none more expression ((50 - 1) / 49), nvcc: CPU s, and wall s per phase (nvcc -time)")
    for name, entry in per_expression.items():
        shown = {k: v for k, v in entry["phases_wall_s"].items() if k in ("cudafe++", "cicc", "ptxas", "gcc (compiling)")}
        print(f"  {name:<26} {entry['cpu_s']:6.2f} s   " + "  ".join(f"{k} {v:.2f}" for k, v in shown.items()))
print("\ntargets:")
for t in targets:
    verdict = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
    unit = {"ratio": "x hand", "seconds": "s CPU", "lines": "lines", "thrust": "x Thrust"}[t["kind"]]
    print(f"  {t['target']:<40} <= {t['goal']:g} {unit:<8} value {fmt(t['value'], '.2f'):>7}  {verdict}"
          + (f"  ({t['note']})" if t["note"] else ""))
print(f"\nload average before/after: {' '.join(load_before)} / {' '.join(load_after)} on {os.cpu_count()} cores; "
      f"commit {commit}{' + changes' if dirty else ''}; wrote {json_path}")
bad = [r["id"] for r in results.values() if r["status"] in ("failed", "COMPILED")]
if bad:
    print(f"compile_time: unexpected result for {', '.join(bad)}", file=sys.stderr)
sys.exit(1 if bad else 0)
