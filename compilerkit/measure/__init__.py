"""Measuring compiled code: the shared best-of-N timer (`timing`), this machine's roofline
numbers (`machine`), per-node profiles against onnxruntime (`profile`)."""
