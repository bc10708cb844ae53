"""Measuring compiled code: the shared best-of-N timer (`timing`), this machine's roofline
numbers (`machine`), per-node profiles against onnxruntime (`profile`) and their sums per op
type side by side (`compare`)."""
