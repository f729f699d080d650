"""Smoke test of the reproduction command for the papers' baselines: ``--quick`` must run
end to end in seconds and write its JSON (the full mode is documented in
docs/baselines_reproduction.md)."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "ww_table1.py"


def test_ww_table1_quick(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "ww_table1.json").read_text())
    assert {r["oracle"] for r in result["oracles"]} == {"HRR", "HadaOracle", "Hashtogram"}
    assert {r["algorithm"] for r in result["heavy_hitters"]} == {"HadaHeavy", "TreeHist (Count-Sketch)"}
    assert all(r["max_err"] > 0 for r in result["oracles"])
    assert "log-log slope" in done.stdout
    assert (tmp_path / "ww_table1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
