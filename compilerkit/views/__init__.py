"""Plain data views of compilerkit results for the workbench's pictures (`mlsys_viz`); nothing
here draws:

- ir.py: ir_view_data(cm) (the stage texts and which lines came from each ONNX node) and
  loop_nest(it) (one `krnl.iterate` as the loops it emits);
- graph.py: onnx_graph_view(model) / ir_graph_view(module): an ONNX model or an ONNX IR module
  as nodes and edges coloured by op kind, ready for `viz.graph_figure` (the drawing lmskit's
  TensorFlow graphs use);
- show.py: excerpts of the stage texts (one LLVM IR function, one assembly function, the
  ONNX IR or Kernel IR lines of chosen nodes: `node_excerpt`);
- passes.py: pass_trace(module), what each ONNX pass removed, added and changed (the fusions
  it made), and trace_table(rows).
"""

from compilerkit.views.graph import ir_graph_view, node_counts, onnx_graph_view
from compilerkit.views.ir import STAGES, ir_view_data, loop_nest

__all__ = ["ir_view_data", "loop_nest", "STAGES", "onnx_graph_view", "ir_graph_view",
           "node_counts"]
