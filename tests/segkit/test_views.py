"""segkit.views prepares plain data; mlsys_viz.volume draws it without knowing segkit."""

import subprocess
import sys

import numpy as np
import pytest
from mlsys_datasets import em_volume

import segkit
from mlsys_viz import volume as vv
from segkit import views


@pytest.fixture(scope="module")
def vol():
    v = em_volume(24, seed=11)
    return v, segkit.agglomerate(v.affinities, 0.3, size=300)


def test_pictures_layer_imports_no_kit():
    code = ("import sys, mlsys_viz.volume; "
            "print(any(m.split('.')[0] in ('segkit', 'lmskit', 'compilerkit') "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_importing_segkit_loads_no_plotting_or_numba():
    code = ("import sys, segkit; print(sorted(m for m in ('plotly', 'numba', 'dask', 'zarr') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_colours_are_fixed_per_id_and_overlay_keeps_background():
    a = vv.label_colors(np.array([0, 5, 7, 5]))
    assert a[0].tolist() == [0, 0, 0] and a[1].tolist() == a[3].tolist() != a[2].tolist()
    img = np.linspace(0, 1, 16).reshape(4, 4)
    rgb = vv.overlay(img, np.zeros((4, 4), int))
    assert rgb.shape == (4, 4, 3) and rgb[0, 0].tolist() == [0, 0, 0] and rgb[-1, -1, 0] == 255


def test_slices_meshes_and_viewer_widget(vol):
    v, seg = vol
    fig = vv.slice_figure(v.image, seg, step=4)
    assert len(fig.frames) == 6
    widget = vv.slice_viewer(v.image, seg)
    slider, figure = widget.children[0].children[0], widget.children[1]
    before = np.array(figure.data[0].z).copy()
    slider.value = 12
    assert not np.array_equal(before, np.array(figure.data[0].z))
    ids = views.largest(seg, 2)
    meshes = views.meshes(seg, ids, voxel_size=(4, 1, 1))
    for _name, _i, verts, faces in meshes:
        assert verts[:, 2].max() <= 4 * 24 + 4 and verts[:, 0].max() <= 25  # (x, y, z) order
        assert faces.max() < len(verts)
    assert len(vv.mesh_figure(meshes).data) == 2
    with pytest.raises(ValueError, match="segment 123456789"):
        views.meshes(seg, [123456789])


def test_merge_tree_frames_coarsen(vol):
    v, _ = vol
    mf = views.merge_frames(v.affinities, [0.3, 0.9, 0.6], z=12)
    assert mf["thresholds"] == [0.9, 0.6, 0.3]
    assert mf["segments"][0] >= mf["segments"][1] >= mf["segments"][2]
    # at the lowest cut it is the mean agglomeration itself
    assert np.array_equal(mf["frames"][-1], segkit.agglomerate(v.affinities, 0.3, mode="mean")[12])
    fig = vv.frames_figure(mf["frames"], ["a", "b", "c"], v.image[12], captions=["1", "2", "3"])
    assert len(fig.frames) == 3


def test_round_frames_and_neuroglancer_state(vol):
    from dask.distributed import Client

    v, seg = vol
    with Client(processes=False, n_workers=1, threads_per_worker=1,
                dashboard_address=":0") as client:
        _, info = segkit.chunked_agglomerate(v.affinities, 8, 0.5, client=client,
                                             return_info=True)
    rf = views.round_frames(info, info["fragments"][12], 12)
    # 24^3 in chunks of 8: 27 chunks, then 8 boxes of 16^3, then two halves (z < 16 and
    # z >= 16, each 16 x 24 x 24), then the root that joins them
    assert len(rf["frames"]) == len(info["rounds"]) == 4
    assert [len(r) for r in info["rounds"]] == [27, 8, 2, 1]
    assert [t["hi"][0] - t["lo"][0] for t in info["rounds"][2]] == [16, 8]
    assert rf["frames"][0].any() and not rf["frames"][-1].any()  # last round: nothing frozen
    assert [len(b) for b in rf["boxes"]] == [9, 4, 1, 1]
    state = vv.neuroglancer_state(v.image, seg, v.affinities)
    assert [layer.name for layer in state.layers] == ["image", "affinities", "segmentation"]
