"""benchmarks/peer_bench.py: its --quick run with the peers installed here writes the JSON shape
the docs promise (absent peers reported, never a crash), every engine that ran agrees with
onnxruntime, and a peer that is missing or fails on a model is recorded, not raised."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "peer_bench.py"
STATS = {"latency_s", "median_s", "compile_s", "calls", "rel_err"}


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("peer_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_quick_run_writes_the_promised_shape(bench, tmp_path):
    out = tmp_path / "peer.json"
    # A process of its own: the script pins itself to two cores and the peers start threads.
    r = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--rounds", "2", "--gap", "0",
                        "--out", str(out)], capture_output=True, text=True, timeout=900,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert set(doc["versions"]) | set(doc["absent"]) == set(bench.ENGINES)
    assert "onnxruntime" in doc["versions"] and "compilerkit" in doc["versions"]
    assert len(doc["load"]["before"]) == 3 and len(doc["load"]["after"]) == 3
    assert doc["machine"]["pinned_to"] and doc["machine"]["cores"] >= 1
    assert list(doc["results"]) == list(bench.QUICK_MODELS)
    # the machine's own two-thread ceiling beside each model's 2-thread rounds (no value asserted)
    assert list(doc["machine_ceiling_t2"]) == list(bench.QUICK_MODELS)
    assert all(len(c) == 2 and min(c) > 0 for c in doc["machine_ceiling_t2"].values())
    for model, row in doc["results"].items():
        assert set(row) == {"t1", "t2"}
        skipped = doc["skipped"].get(model, {})
        for t in ("t1", "t2"):
            for e in doc["versions"]:
                if e in skipped:
                    assert e not in row[t] and skipped[e]  # with its reason
                    continue
                cell = row[t][e]
                assert set(cell) == STATS, (model, t, e)
                assert 0 < cell["latency_s"] <= cell["median_s"]
                assert cell["compile_s"] > 0 and cell["calls"] >= 1
                assert cell["rel_err"] < 1e-3, (model, t, e, cell["rel_err"])
    # compilerkit compiles the quick model: the check is not vacuous for it
    assert "compilerkit" in doc["results"][bench.QUICK_MODELS[0]]["t2"]
    assert bench.QUICK_MODELS[0] in r.stdout and "geomean" in r.stdout


def test_a_missing_peer_is_reported_absent(bench, monkeypatch):
    class Missing:
        def version(self):
            raise ImportError("No module named 'nothere'")

    monkeypatch.setitem(bench.PEERS, "nothere", Missing())
    versions, absent = bench.installed(["onnxruntime", "nothere"])
    assert "onnxruntime" in versions
    assert "nothere" in absent and "nothere" in absent["nothere"]
    assert ".[peers]" in absent["nothere"]  # says how to get it


def test_a_peer_that_fails_on_a_model_is_skipped_with_the_reason(bench, monkeypatch, tmp_path):
    class Broken:
        def version(self):
            return "0"

        def build(self, *args):
            raise RuntimeError("cannot lower op Frobnicate")

    monkeypatch.setitem(bench.PEERS, "broken", Broken())
    row, skipped = bench.bench_model("small_resnet", ["onnxruntime", "broken"], "small",
                                     rounds=2, budget=5.0, gap=0.0, workdir=tmp_path)
    assert "Frobnicate" in skipped["broken"]
    assert set(row["t1"]) == set(row["t2"]) == {"onnxruntime"}
    assert row["t1"]["onnxruntime"]["rel_err"] == 0.0


def test_bad_arguments_are_refused_by_name(bench):
    with pytest.raises(SystemExit):
        bench.main(["--engines", "tensorrt", "--out", "/dev/null"])


def test_modern_models_are_valid_onnx_and_seeded(bench):
    import onnx

    for name in bench.MODERN:
        m = bench._modern(name)
        onnx.checker.check_model(m, full_check=True)
        assert m.SerializeToString() == bench._modern(name).SerializeToString()
    with pytest.raises(ValueError, match="unknown modern model 'bert'"):
        bench._modern("bert")


@pytest.mark.parametrize("steady", [False, True])
def test_steady_calls_each_engine_once_more_before_each_timed_call(bench, steady):
    """--steady: after the gap, an untimed call of the same engine, then the timed one; each
    engine's calls: one warm-up, then one or two per round."""
    log = []
    fns = {e: (lambda x, e=e: log.append(e)) for e in ("a", "b")}
    times = bench.measure(fns, None, rounds=3, budget=10.0, gap=0.0, seed=1, steady=steady)
    assert {e: len(ts) for e, ts in times.items()} == {"a": 3, "b": 3}
    assert log.count("a") == log.count("b") == 1 + 3 * (2 if steady else 1)
    if steady:  # each timed call follows an untimed one of the same engine
        rounds = log[2:]
        assert all(rounds[i] == rounds[i + 1] for i in range(0, len(rounds), 2))


@pytest.mark.slow
def test_peer_profile_quick_run_writes_the_promised_shape(tmp_path):
    """benchmarks/peer_profile_bench.py --quick: every engine's total and op totals, and the
    compilerkit / OpenVINO node pairs (largest gap first) for the one small model."""
    out = tmp_path / "profile.json"
    script = ROOT / "benchmarks" / "peer_profile_bench.py"
    r = subprocess.run([sys.executable, str(script), "--quick", "--repeat", "2", "--out",
                        str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    (entry,) = doc["models"].values()
    assert "compilerkit" in entry["total_s"] and "compilerkit" in entry["op_totals"]
    assert set(entry["total_s"]) | set(doc["absent"]) >= {"compilerkit", "openvino",
                                                           "onnxruntime"}
    gaps = [n["gap_s"] for n in entry["nodes"]]
    assert gaps == sorted(gaps, reverse=True)
    if "openvino" in doc["absent"]:  # the peers extra is not installed: nothing to pair
        assert "pip install" in doc["absent"]["openvino"] and not entry["nodes"]
        assert entry["compilerkit_unmatched_s"] == pytest.approx(entry["total_s"]["compilerkit"])
    else:
        assert any(n["op_type"] == "Conv" for n in entry["nodes"])
    bad = subprocess.run([sys.executable, str(script), "--models", "nope", "--out",
                          str(out)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode != 0 and "unknown model 'nope'" in bad.stderr
