"""Experiments on top of the kits: the sweeps, timings and figures that notebooks 16-18 and
the benchmarks run. They live here, not in compilerkit, because they time against other
libraries (onnxruntime, TensorFlow), read mlsys_datasets and draw with plotly; compilerkit keeps
only what a compile needs.

    fastconv   notebook 17: Winograd and FFT by hand, the roofline sweep and its figures
    inference  notebook 18 (ZNNi): the throughput curve against patch size, the planner's picks
    pznet      notebook 18 (PZnet): the blocked layout, the 3-D U-Net against onnxruntime and TF
    loopnest   notebook 16: the two code generators' compile and run times side by side
"""
