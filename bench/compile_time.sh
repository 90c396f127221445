#!/usr/bin/env bash
# The compile-time regression benchmark, run on the BUILD machine (no GPU needed): how many
# CPU seconds (user + sys of the compiler and all its children, from /usr/bin/time; never
# wall time) etensor's expression templates cost, as ratios to a hand-written kernel, and
# how long the diagnostics of a device mix are.
#
#   bench/compile_time.sh                 everything (about 10 to 20 minutes on 2 cores)
#   bench/compile_time.sh --quick         hand kernels, depth-6 shared form, core one-expression .cu
#   bench/compile_time.sh --only LIST     comma-separated groups, ids or shell patterns:
#                                         --only hand,shared   --only 'shared-[1-4]-*'   --only '*-nvcc'
#   bench/compile_time.sh --list          the ids and groups, nothing compiled
#   bench/compile_time.sh --json PATH     where the JSON goes (default bench/results/compile_time.json;
#                                         for --quick/--only: ${TMPDIR:-/tmp}/et-compile_time.partial.json,
#                                         so that a partial run never replaces the committed full one)
#
# What is measured, one compile at a time (never in parallel), with
#   nvcc -std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr -Xcompiler=-fopenmp ...  (Cuda<0>)
#   g++  -std=c++20 -O3 -march=x86-64-v3 -fopenmp ...                                (Cpu)
# (the flags the et::et target gives a Release build):
#   hand       hand.cu: a plain __global__ kernel computing e_k = e_{k-1}*a/b*(b-e_{k-1}),
#              k = 1..6, 3 loads and 1 store per element, and its launch (nvcc): the reference
#              every nvcc measurement is a ratio to; hand_omp.cpp: the same as an OpenMP loop (g++),
#              the reference of the g++ measurements
#   shared     depth D = 1..6, one assignment: auto e1 = x*a/b*(b-x); auto e2 = e1*a/b*(b-e1); ... out = eD;
#   chain      depth D = 1..6, one assignment: auto e1 = x*a/b*(b-a); auto e2 = e1*a/b*(b-a); ... out = eD;
#   deep       the chain form at 31 and 63 levels
#   fifty      50 distinct fused expressions (f(x * c + y) op g(w) * d) and the one-expression
#              baseline TU, both including only the core header
#   core       the one-expression baseline TU as a .cu including only the core header (nvcc)
#   et         the same 50 / one expressions including <et/et.hpp> (the measurement this
#              script made before the core header existed)
#   diag       tests/compile_fail/{cpu_plus_cuda,cuda0_plus_cuda1,assign_cuda_to_cpu,
#              device_mix_in_function,matmul_devices,conv2d_devices}.cpp with -DET_FAIL under g++
#              and nvcc: non-empty diagnostic lines and error lines
# Every compile runs under `timeout` (COMPILE_TIMEOUT seconds, default 120); one that runs
# out is recorded as a timeout, not a failure, and the deeper depths of the same form and
# compiler are then recorded as timeouts without being run. The core header is
# <et/core.hpp>; ET_CORE_HEADER=et/et.hpp measures with the full header instead.
#
# Targets (ratios: CPU seconds over the hand kernel's, same compiler):
#   depth-6 shared form, nvcc <= 4x;  50 distinct expressions (core), nvcc <= 7x;
#   31-level chain, nvcc <= 6x;  core one-expression .cu, nvcc <= 2x;
#   63-level chain: g++ <= 10 s and nvcc <= 30 s;  every device-mix diagnostic <= 10 lines.
# The JSON (committed under bench/results/) is read by scripts/bench-all, which puts the
# target rows in its table. The machine's cores, load average, compiler versions, date and
# git commit are recorded beside the times: on a busy 2-core machine the times are upper bounds.
#
# Environment: CXX (default g++), NVCC (default nvcc), NICE (default "nice -n 10"),
# COMPILE_TIMEOUT (seconds per compile, default 120), ET_CORE_HEADER (default et/core.hpp).
# Exit status: 0 when every compile that should succeed did (or timed out) and every
# device mix was refused; 1 otherwise (the JSON is written either way); 2 on bad usage.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
nvcc=${NVCC:-nvcc}
eigen_flags=$(pkg-config --cflags eigen3 2>/dev/null || echo -I/usr/include/eigen3)
cuda_include=$(dirname "$(dirname "$(command -v "$nvcc" || echo /usr/local/cuda/bin/nvcc)")")/include

export ET_CT_ROOT=$root ET_CT_NVCC=$nvcc ET_CT_CXX=${CXX:-g++} ET_CT_NICE=${NICE:-nice -n 10}
export ET_CT_EIGEN=$eigen_flags ET_CT_CUDA_INCLUDE=$cuda_include
exec python3 - "$@" <<'PY'
import argparse, fnmatch, json, os, re, shlex, shutil, subprocess, sys, tempfile, time

sys.stdout.reconfigure(line_buffering=True)

root = os.environ["ET_CT_ROOT"]
cxx, nvcc = os.environ["ET_CT_CXX"], os.environ["ET_CT_NVCC"]
nice = shlex.split(os.environ["ET_CT_NICE"])
eigen = []
for flag in shlex.split(os.environ["ET_CT_EIGEN"]):
    eigen += ["-isystem", flag[2:]] if flag.startswith("-I") else [flag]
core_header = os.environ.get("ET_CORE_HEADER", "et/core.hpp")
timeout_s = float(os.environ.get("COMPILE_TIMEOUT", "120"))

CXX_FLAGS = ["-std=c++20", "-O3", "-march=x86-64-v3", "-fopenmp", "-DET_WITH_CUDA=1", f"-I{root}/include",
             f"-I{root}/kernels", *eigen, "-isystem", os.environ["ET_CT_CUDA_INCLUDE"]]
NVCC_FLAGS = ["-std=c++20", "-O3", "-arch=sm_90", "--expt-relaxed-constexpr", "-Xcompiler=-fopenmp",
              "-DET_WITH_CUDA=1", "-DET_WITH_CUDNN=1", f"-I{root}/include", f"-I{root}/kernels", *eigen]
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

def write(name, text):
    with open(os.path.join(work, name), "w") as f:
        f.write(text)

DEVICE_PRELUDE = ["#if defined(__CUDACC__)", "using Dev = et::Cuda<0>;", "#else", "using Dev = et::Cpu;", "#endif",
                  "using Vec = et::Tensor<float, 1, Dev>;", ""]

def depth_unit(form, depth):
    lines = [f"// Generated by bench/compile_time.sh: the {form} form at depth {depth}, one assignment.",
             f"#include <{core_header}>", "", *DEVICE_PRELUDE,
             "void run(const Vec& x, const Vec& a, const Vec& b, Vec& out) {"]
    previous = "x"
    for k in range(1, depth + 1):
        tail = f"(b - {previous})" if form == "shared" else "(b - a)"
        lines.append(f"  auto e{k} = {previous} * a / b * {tail};")
        previous = f"e{k}"
    lines += [f"  out = {previous};", "}", ""]
    return "\n".join(lines)

HAND_STEPS = "\n".join("  e = e * av / bv * (bv - e);" for _ in range(6))
HAND_CU = f"""// Generated by bench/compile_time.sh: the hand-written reference, depth 6.
#include <cstdint>

__global__ void depth6(const float* __restrict__ x, const float* __restrict__ a, const float* __restrict__ b,
                       float* __restrict__ out, std::int64_t n) {{
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float av = a[i], bv = b[i];
  float e = x[i];
{HAND_STEPS}
  out[i] = e;
}}

void run(const float* x, const float* a, const float* b, float* out, std::int64_t n) {{
  depth6<<<static_cast<unsigned>((n + 255) / 256), 256>>>(x, a, b, out, n);
}}
"""
HAND_OMP = f"""// Generated by bench/compile_time.sh: the hand-written reference for g++, depth 6.
#include <cstdint>

void run(const float* __restrict x, const float* __restrict a, const float* __restrict b, float* __restrict out,
         std::int64_t n) {{
#pragma omp parallel for simd
  for (std::int64_t i = 0; i < n; ++i) {{
    const float av = a[i], bv = b[i];
    float e = x[i];
{chr(10).join('  ' + l for l in HAND_STEPS.splitlines())}
    out[i] = e;
  }}
}}
"""

def fifty_unit(count, header):
    import itertools
    functions = ["et::exp", "et::tanh", "et::sigmoid", "et::sqrt", "et::abs", "et::relu", "et::sin", "et::cos",
                 "et::square", "et::gelu"]
    operators = ["+", "-", "*", "/"]
    # 50 distinct (f, g, op) triples: every expression is a different type, so a new kernel.
    triples = [(f, g, op) for op in operators for f, g in itertools.permutations(functions, 2)]
    triples = triples[::len(triples) // 50][:50]
    assert len(set(triples)) == 50
    lines = ["// Generated by bench/compile_time.sh: fused expressions for a compile-time measurement.",
             f"#include <{header}>", "",
             "template <class D>",
             "void run_all(const et::Tensor<float, 1, D>& x, const et::Tensor<float, 1, D>& y,",
             "             const et::Tensor<float, 1, D>& w, et::Tensor<float, 1, D>& z) {"]
    for k, (f, g, op) in enumerate(triples[:count]):
        lines.append(f"  z = {f}(x * {0.5 + k / 100:.2f}f + y) {op} {g}(w) * {1.5 + k / 100:.2f}f;")
    lines += ["}", "", *DEVICE_PRELUDE,
              "template void run_all<Dev>(const Vec&, const Vec&, const Vec&, Vec&);", ""]
    return "\n".join(lines)

write("hand.cu", HAND_CU)
write("hand_omp.cpp", HAND_OMP)
for form in ("shared", "chain"):
    for d in (*DEPTHS, *(DEEP if form == "chain" else ())):
        text = depth_unit(form, d)
        write(f"{form}{d}.cpp", text)
        write(f"{form}{d}.cu", text)
for name, count, header in (("fifty_core", 50, core_header), ("one_core", 1, core_header),
                            ("fifty_et", 50, "et/et.hpp"), ("one_et", 1, "et/et.hpp")):
    text = fifty_unit(count, header)
    write(f"{name}.cpp", text)
    write(f"{name}.cu", text)

def command(m):
    src = m["source"]
    if m["group"] == "diag":
        path = os.path.join(root, "tests", "compile_fail", f"{src}.cpp")
        if m["compiler"] == "nvcc":
            return [nvcc, *NVCC_FLAGS, "-DET_FAIL", "-x", "cu", "-c", path, "-o", os.devnull]
        return [cxx, *CXX_FLAGS, "-DET_FAIL", "-fsyntax-only", path]
    if m["compiler"] == "nvcc":
        src = src if src.endswith(".cu") else f"{src}.cu"
        return [nvcc, *NVCC_FLAGS, "-c", os.path.join(work, src), "-o", os.path.join(work, f"{m['id']}.o")]
    src = src if "." in src else f"{src}.cpp"
    return [cxx, *CXX_FLAGS, "-c", os.path.join(work, src), "-o", os.path.join(work, f"{m['id']}.o")]

# ---- timing ------------------------------------------------------------------------------
def clean(text):
    return text.replace(work + "/", "<tmp>/").replace(work, "<tmp>").replace(root + "/", "")

ERROR_LINE = re.compile(r"(:\d+:(\d+:)? |\(\d+\): )(fatal )?error")

def diagnostics(text):
    lines = [l for l in clean(text).splitlines() if l.strip()]
    errors = [l for l in lines if ERROR_LINE.search(l)]
    return {"lines": len(lines), "error_lines": len(errors), "first_error": errors[0] if errors else None}

def timed(m):
    """Runs one compile under nice, /usr/bin/time and timeout; returns its record."""
    time_file = os.path.join(work, "time.txt")
    argv = [*nice, "/usr/bin/time", "-f", "%U %S %M", "-o", time_file,
            "timeout", "-k", "10", f"{timeout_s:g}", *command(m)]
    print(f"compile_time: {m['id']} ...", end="", file=sys.stderr, flush=True)
    started = time.monotonic()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          cwd=work)
    wall = time.monotonic() - started
    output = proc.stdout.decode(errors="replace")
    record = {"id": m["id"], "group": m["group"], "compiler": COMPILERS[m["compiler"]], "what": m["what"]}
    if m["depth"] is not None:
        record["depth"] = m["depth"]
    try:
        user, system, rss = open(time_file).read().strip().splitlines()[-1].split()
        cpu, rss_mib = round(float(user) + float(system), 2), round(int(rss) / 1024, 1)
    except (OSError, ValueError, IndexError):
        cpu, rss_mib = None, None
    if proc.returncode in (124, 137):
        record.update(status="timeout", cpu_s=None, timeout_s=timeout_s)
        print(f" timed out after {timeout_s:g} s", file=sys.stderr)
        return record
    record.update(cpu_s=cpu, max_rss_mib=rss_mib)
    if m["group"] == "diag":
        record["diagnostics"] = diagnostics(output)
        record["status"] = "refused" if proc.returncode != 0 else "COMPILED"
    else:
        record["status"] = "ok" if proc.returncode == 0 else "failed"
        if proc.returncode != 0:
            record["diagnostics"] = diagnostics(output)
            record["log_tail"] = clean(output).strip().splitlines()[-15:]
    print(f" {record['status']}, {cpu} s CPU ({wall:.1f} s wall)", file=sys.stderr)
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

commit = git("rev-parse", "--short", "HEAD")
dirty = git("status", "--porcelain")
result = {
    "benchmark": "compile-time",
    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    "git": {"commit": commit, "changed_paths": len(dirty.splitlines()) if dirty is not None else None},
    "partial": partial,
    "selection": "quick" if args.quick else (args.only or "all"),
    "machine": {"cores": os.cpu_count(), "load_average_before": " ".join(load_before),
                "load_average_after": " ".join(load_after), "nice": " ".join(nice),
                "minutes": round((time.time() - started) / 60, 1)},
    "compilers": {"g++": version([cxx, "--version"]),
                  "nvcc": version([nvcc, "--version"], r"release ([0-9.]+)"),
                  "nvcc_full": version([nvcc, "--version"], r"(V[0-9.]+)")},
    "flags": {"g++": " ".join(clean(f) for f in CXX_FLAGS), "nvcc": " ".join(clean(f) for f in NVCC_FLAGS)},
    "core_header": core_header,
    "compile_timeout_s": timeout_s,
    "time_measure": "CPU seconds: user + sys of the compiler and its children (/usr/bin/time %U + %S)",
    "reference": {"nvcc": "hand-nvcc", "g++": "hand-gxx"},
    "measurements": results,
    "targets": targets,
    # The fields scripts/bench-all read before the regression benchmark (et/et.hpp, 50 expressions).
    "expressions": 50,
    "expression_shape": "f(x * c + y) op g(w) * d: 6 operations, f and g from 10 functions, op from + - * /",
    "device_mix_diagnostics": diag_summary(),
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
print("\ntargets:")
for t in targets:
    verdict = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
    unit = {"ratio": "x hand", "seconds": "s CPU", "lines": "lines"}[t["kind"]]
    print(f"  {t['target']:<40} <= {t['goal']:g} {unit:<7} value {fmt(t['value'], '.2f'):>7}  {verdict}"
          + (f"  ({t['note']})" if t["note"] else ""))
print(f"\nload average before/after: {' '.join(load_before)} / {' '.join(load_after)} on {os.cpu_count()} cores; "
      f"commit {commit}{' + changes' if dirty else ''}; wrote {json_path}")
bad = [r["id"] for r in results.values() if r["status"] in ("failed", "COMPILED")]
if bad:
    print(f"compile_time: unexpected result for {', '.join(bad)}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
