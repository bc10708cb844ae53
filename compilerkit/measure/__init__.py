"""compilerkit's analysis tools, apart from the pipeline: which line of each stage came from
which ONNX node (`provenance`, recorded by the driver on every compile), ONNX's backend tests
and real models against the oracle (`conformance`), the shared best-of-N timer (`timing`),
this machine's roofline numbers (`machine`), per-node profiles against onnxruntime (`profile`)
and their sums per op type side by side (`compare`)."""
