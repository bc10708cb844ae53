"""The integration layer, on top of the kits: the train-swap-compile pipeline, figures for
`make figures` (with their export), the tour, and running notebooks headless with papermill-style
parameters (used by the test harness and by ``make figures``). The pictures and units the kits
share live below them, in `mlsys_viz`."""

from mlsys_datasets.tf_startup import quiet_first_import as _quiet_first_import

# TensorFlow's C++ start-up lines stay out of notebooks (the pipeline imports it).
_quiet_first_import()
