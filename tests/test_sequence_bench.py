"""benchmarks/sequence_bench.py: its --quick run writes the JSON shape the docs promise (rows
with the median ratio and its range at 1 and 2 threads, load averages, geomeans per family),
every block it times agrees with onnxruntime, and a block that fails to build is a row with
an error, not a crash. No timing is asserted."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "sequence_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("sequence_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sequence_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_quick_run_writes_the_promised_shape(bench, tmp_path):
    out = tmp_path / "seq.json"
    doc = bench.main(["--quick", "--repeat", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(doc))
    assert [r["block"] for r in doc["rows"]] == list(bench.QUICK)
    for row in doc["rows"]:
        assert "error" not in row, row
        assert row["agrees"] and row["rel_error"] <= bench.AGREE
        for n in bench.THREADS:
            lo, hi = row[f"ratio_{n}_range"]
            assert 0 < lo <= row[f"ratio_{n}"] <= hi
            assert row[f"ck_{n}_ms"] > 0 and row[f"ort_{n}_ms"] > 0
        assert len(row["load_start"]) == 3 and len(row["load_end"]) == 3
    assert set(doc["geomean"]) == {f"{f}_{n}t" for f in ("recurrent", "transformer")
                                   for n in bench.THREADS}


def test_a_failing_block_is_a_row(bench, tmp_path, monkeypatch):
    def broken(_dir):
        raise RuntimeError("no such exporter")

    monkeypatch.setitem(bench.BLOCKS, "torch_decoder", ("transformer", broken))
    doc = bench.main(["--blocks", "torch_decoder", "--rounds", "1", "--repeat", "1",
                      "--out", str(tmp_path / "seq.json")])
    assert doc["rows"] == [{"block": "torch_decoder",
                            "error": "RuntimeError: no such exporter"}]
    assert doc["geomean"]["transformer_1t"] is None


def test_unknown_block_is_refused_by_name(bench):
    with pytest.raises(SystemExit):
        bench.main(["--blocks", "lstm_b3_s1_h1", "--out", ""])
