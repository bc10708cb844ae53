"""Notebook 20 run by a person in JupyterLab: training, compiling and the agreement table shows.

The lab server's environment sets SMOKE=1 (tests/browser/conftest.py), which the notebook's
parameters cell reads, so the stored (SMOKE = 0) notebook runs at its small size here.
"""

import pytest

pytestmark = pytest.mark.browser


def test_agreement_table_shows(lab, page, tmp_path):
    lab.open("20_train_swap_compile.ipynb")
    lab.run_all(timeout_s=300)
    page.screenshot(path=str(tmp_path / "20_train_swap_compile.png"), full_page=True)
    assert lab.errors() == []
    table = page.locator(".jp-OutputArea table.agreement")
    table.wait_for(timeout=30_000)
    assert table.count() == 1
    rows = table.locator("tbody tr")
    assert rows.count() == 3
    targets = [rows.nth(i).get_attribute("data-target") for i in range(rows.count())]
    assert targets == ["host", "s390x", "gpu"]
    for target in ("host", "s390x"):
        cells = table.locator(f"tr[data-target='{target}'] td")
        assert cells.nth(1).inner_text() == "ok"
        agree, total = cells.nth(2).inner_text().split("/")
        assert agree == total and int(total) > 0
    gpu_status = table.locator("tr[data-target='gpu'] td").nth(1).inner_text()
    assert gpu_status in ("ok", "no CUDA device")
