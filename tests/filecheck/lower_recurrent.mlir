// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// LSTM, GRU and RNN (lowering/recurrent.py): the input projection of every step is one
// krnl.matmul before the time loop; inside the loop (one krnl.iterate over the steps) only
// the recurrent product H_{t-1} @ R^T, then one elementwise nest updating the state in place.

// RNN, reverse, Relu, sequence_lens at run time: lengths checked, each step reads time
// L-1-s while s < L (else time s, where Y gets zeros), the state kept past a length.
func.func @rnn_seq_lens(%x: tensor<3x2x4xf32>, %w: tensor<1x2x4xf32>, %r: tensor<1x2x2xf32>, %l: tensor<2xi32>) -> (tensor<3x1x2x2xf32>, tensor<1x2x2xf32>) attributes {input_names = ["x", "w", "r", "l"], output_names = ["y", "yh"], onnx_opset = 14 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y, %yh = "onnx.RNN"(%x, %w, %r, %none, %l, %none) {hidden_size = 2 : i64, direction = "reverse", activations = ["Relu"], onnx_node_name = "rnn"} : (tensor<3x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x2xf32>, none, tensor<2xi32>, none) -> (tensor<3x1x2x2xf32>, tensor<1x2x2xf32>)
  func.return %y, %yh : tensor<3x1x2x2xf32>, tensor<1x2x2xf32>
}
// CHECK-LABEL: func.func @rnn_seq_lens(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<3x2x4xf32>, {{%[0-9]+}}: memref<1x2x4xf32>, {{%[0-9]+}}: memref<1x2x2xf32>, [[L:%[0-9]+]]: memref<2xi32>, [[Y:%[0-9]+]]: memref<3x1x2x2xf32>, [[YH:%[0-9]+]]: memref<1x2x2xf32>
// CHECK:         "krnl.check"({{%[0-9]+}}) {message = "node 'rnn' (RNN): a value of input sequence_lens is out of range; valid lengths are [0, 3]"}
// W^T and R^T, then xw = X @ W^T over all 3 x 2 rows before the loop:
// CHECK:         [[WT:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<4x2xf32>
// CHECK:         [[RT:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<2x2xf32>
// CHECK:         [[XW:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<6x2xf32>
// CHECK:         "krnl.matmul"([[X]], [[WT]], [[XW]], {{.*}} {sizes = [6 : i64, 2 : i64, 4 : i64]
// CHECK:         [[G:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<2x2xf32>
// The time loop:
// CHECK:         ^bb0([[S:%[0-9]+]]: index):
// CHECK:         ^bb0([[B:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK:         [[N:%[0-9]+]] = arith.index_cast
// CHECK-NEXT:    [[VALID:%[0-9]+]] = arith.cmpi slt, [[S]], [[N]] : index
// CHECK:         [[T:%[0-9]+]] = arith.select [[VALID]], {{%[0-9]+}}, [[S]] : index
// CHECK:         "krnl.load"([[XW]]
// CHECK:         "krnl.store"({{%[0-9]+}}, [[G]], [[B]], [[J]])
// The recurrent product reads the state, which is Y_h's buffer:
// CHECK:         "krnl.matmul"([[YH]], [[RT]], [[G]], {{.*}} {sizes = [2 : i64, 2 : i64, 2 : i64]
// CHECK:         ^bb0([[B2:%[0-9]+]]: index, [[J2:%[0-9]+]]: index):
// CHECK:         [[OK:%[0-9]+]] = arith.cmpi slt, [[S]], {{%[0-9]+}} : index
// CHECK:         [[PREV:%[0-9]+]] = "krnl.load"([[YH]]
// CHECK:         [[H:%[0-9]+]] = arith.maximumf {{%[0-9]+}}, {{%[0-9]+}} : f32
// CHECK:         [[OUT:%[0-9]+]] = arith.select [[OK]], [[H]], {{%[0-9]+}} : f32
// CHECK-NEXT:    "krnl.store"([[OUT]], [[Y]], {{%[0-9]+}}, {{%[0-9]+}}, [[B2]], [[J2]])
// CHECK-NEXT:    [[KEEP:%[0-9]+]] = arith.select [[OK]], [[H]], [[PREV]] : f32
// CHECK-NEXT:    "krnl.store"([[KEEP]], [[YH]], {{%[0-9]+}}, [[B2]], [[J2]])
// A length of 0 leaves zeros as Y_h (onnxruntime's answer):
// CHECK:         arith.cmpi eq, {{%[0-9]+}}, {{%[0-9]+}} : i64
// CHECK:         func.return

// -----
// GRU (linear_before_reset = 0), Y unused: the product is split, z and r first (4 of the 6
// gate columns), then (r * H_{t-1}) @ Rh^T into the h gate's 2 columns.
func.func @gru(%x: tensor<2x1x3xf32>, %w: tensor<1x6x3xf32>, %r: tensor<1x6x2xf32>) -> tensor<1x1x2xf32> attributes {input_names = ["x", "w", "r"], output_names = ["yh"], onnx_opset = 14 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y, %yh = "onnx.GRU"(%x, %w, %r, %none, %none, %none) {hidden_size = 2 : i64, onnx_node_name = "gru"} : (tensor<2x1x3xf32>, tensor<1x6x3xf32>, tensor<1x6x2xf32>, none, none, none) -> (none, tensor<1x1x2xf32>)
  func.return %yh : tensor<1x1x2xf32>
}
// CHECK-LABEL: func.func @gru(
// X @ W^T for both steps, into xw, onto which each step's products then accumulate:
// CHECK:         "krnl.alloc"() {{.*}} memref<3x6xf32>
// CHECK:         "krnl.alloc"() {{.*}} memref<2x6xf32>
// CHECK:         [[XW:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<2x6xf32>
// CHECK:         "krnl.matmul"({{%[0-9]+}}, {{%[0-9]+}}, [[XW]], {{.*}} {sizes = [2 : i64, 6 : i64, 3 : i64]
// CHECK:         [[RH:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<1x2xf32>
// CHECK:         "krnl.matmul"({{%[0-9]+}}, {{%[0-9]+}}, [[XW]], {{.*}} {sizes = [1 : i64, 4 : i64, 2 : i64]
// CHECK:         math.exp
// CHECK:         "krnl.store"({{%[0-9]+}}, [[RH]]
// CHECK:         "krnl.matmul"([[RH]], {{%[0-9]+}}, [[XW]], {{.*}} {sizes = [1 : i64, 2 : i64, 2 : i64]
// CHECK:         math.tanh
// CHECK:         func.return

// -----
// Constant W and R: laid out at compile time as the micro-kernel's B, W^T in strips of 32
// columns (the default lanes=16), the 2 gate columns padded to one strip; xw's rows are that
// wide. A batch of 1 keeps R^T row-major, [hidden, xw's width], so each step's product is one
// call of the one-row kernel over every gate column.
func.func @rnn_constant_weights(%x: tensor<2x1x3xf32>) -> tensor<1x1x2xf32> attributes {input_names = ["x"], output_names = ["yh"], onnx_opset = 14 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %w = "onnx.Constant"() {value = dense<[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]> : tensor<1x2x3xf32>} : () -> tensor<1x2x3xf32>
  %r = "onnx.Constant"() {value = dense<[[[0.5, -0.5], [0.25, 1.0]]]> : tensor<1x2x2xf32>} : () -> tensor<1x2x2xf32>
  %y, %yh = "onnx.RNN"(%x, %w, %r, %none, %none, %none) {hidden_size = 2 : i64, onnx_node_name = "rnn"} : (tensor<2x1x3xf32>, tensor<1x2x3xf32>, tensor<1x2x2xf32>, none, none, none) -> (none, tensor<1x1x2xf32>)
  func.return %yh : tensor<1x1x2xf32>
}
// CHECK-LABEL: func.func @rnn_constant_weights(
// CHECK:         [[WT:%[0-9]+]] = "krnl.global"() {sym_name = "wt_rnn_0", {{.*}} memref<96xf32>
// CHECK-NEXT:    [[RT:%[0-9]+]] = "krnl.global"() {sym_name = "rt_rnn_0", {{.*}} memref<2x32xf32>
// CHECK-NEXT:    [[XW:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<2x32xf32>
// CHECK:         "krnl.matmul"({{%[0-9]+}}, [[WT]], [[XW]], {{.*}} {sizes = [2 : i64, 32 : i64, 3 : i64], {{.*}} strides = [3 : i64, 1 : i64, 32 : i64, 32 : i64]
// CHECK:         "krnl.matmul"({{%[0-9]+}}, [[RT]], [[XW]], {{.*}} {sizes = [1 : i64, 2 : i64, 2 : i64], {{.*}} strides = [2 : i64, 1 : i64, 32 : i64, 32 : i64]
// CHECK:         func.return

// -----
// The same RNN on a batch of 2: R^T in strips too (a strip of 32 columns, 64 elements), each
// step's product a strip product over the padded width.
func.func @rnn_constant_weights_batch(%x: tensor<2x2x3xf32>) -> tensor<1x2x2xf32> attributes {input_names = ["x"], output_names = ["yh"], onnx_opset = 14 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %w = "onnx.Constant"() {value = dense<[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]> : tensor<1x2x3xf32>} : () -> tensor<1x2x3xf32>
  %r = "onnx.Constant"() {value = dense<[[[0.5, -0.5], [0.25, 1.0]]]> : tensor<1x2x2xf32>} : () -> tensor<1x2x2xf32>
  %y, %yh = "onnx.RNN"(%x, %w, %r, %none, %none, %none) {hidden_size = 2 : i64, onnx_node_name = "rnn"} : (tensor<2x2x3xf32>, tensor<1x2x3xf32>, tensor<1x2x2xf32>, none, none, none) -> (none, tensor<1x2x2xf32>)
  func.return %yh : tensor<1x2x2xf32>
}
// CHECK-LABEL: func.func @rnn_constant_weights_batch(
// CHECK:         [[WT:%[0-9]+]] = "krnl.global"() {sym_name = "wt_rnn_0", {{.*}} memref<96xf32>
// CHECK-NEXT:    [[RT:%[0-9]+]] = "krnl.global"() {sym_name = "rt_rnn_0", {{.*}} memref<64xf32>
// CHECK-NEXT:    [[XW:%[0-9]+]] = "krnl.alloc"() {{.*}} memref<4x32xf32>
// CHECK:         "krnl.matmul"({{%[0-9]+}}, [[WT]], [[XW]], {{.*}} {sizes = [4 : i64, 32 : i64, 3 : i64], {{.*}} strides = [3 : i64, 1 : i64, 32 : i64, 32 : i64]
// CHECK:         "krnl.matmul"({{%[0-9]+}}, [[RT]], [[XW]], {{.*}} {sizes = [2 : i64, 32 : i64, 2 : i64], {{.*}} strides = [2 : i64, 1 : i64, 32 : i64, 32 : i64]
// CHECK:         func.return
