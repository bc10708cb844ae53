"""The integration layer, on top of the kits: the train-swap-compile pipeline, figures for
`make figures` (with their export), the tour, and running notebooks headless with papermill-style
parameters (used by the test harness and by ``make figures``). The pictures and units the kits
share live below them, in `mlsys_viz`."""
