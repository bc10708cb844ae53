// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Transformer ops (lowering/attention.py). Einsum is one accumulation nest over the equation's
// letters, output letters first: out[b, i, k] += a[b, i, j] * b[b, j, k]. Swish is x times the
// overflow-free sigmoid of alpha * x. RotaryEmbedding rotates the pairs (k, k + d/2) of each
// head with cos/sin read at [batch, position]. Attention computes the scores with Q and K each
// scaled by sqrt(scale), adds the causal bias (0 where key <= query, -inf after), keeps the
// row maximum of scores and of the bias, exponentiates with the maximum subtracted (0 for an
// all -inf row), divides by the sum (1 where it is 0), zeroes rows whose bias is all -inf,
// then accumulates P @ V; query head h = 2g + r reads key/value head g (grouped heads).

func.func @einsum_batch_matmul(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> attributes {input_names = ["a", "b"], output_names = ["y"], onnx_opset = 12 : i64} {
  %y = "onnx.Einsum"(%a, %b) {equation = "bij, bjk -> bik", onnx_node_name = "ein"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  func.return %y : tensor<2x3x5xf32>
}
// CHECK-LABEL: func.func @einsum_batch_matmul(
// CHECK-SAME:    [[A:%[0-9]+]]: memref<2x3x4xf32>, [[B:%[0-9]+]]: memref<2x4x5xf32>, [[Y:%[0-9]+]]: memref<2x3x5xf32>)
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[K:%[0-9]+]]: index, [[J:%[0-9]+]]: index):
// CHECK-NEXT:      [[X:%[0-9]+]] = "krnl.load"([[A]], [[N]], [[I]], [[J]])
// CHECK-NEXT:      [[W:%[0-9]+]] = "krnl.load"([[B]], [[N]], [[J]], [[K]])
// CHECK-NEXT:      [[P:%[0-9]+]] = arith.mulf [[X]], [[W]] : f32
// CHECK-NEXT:      [[OLD:%[0-9]+]] = "krnl.load"([[Y]], [[N]], [[I]], [[K]])
// CHECK-NEXT:      [[S:%[0-9]+]] = arith.addf [[OLD]], [[P]] : f32
// CHECK-NEXT:      "krnl.store"([[S]], [[Y]], [[N]], [[I]], [[K]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 5 : i64], [0 : i64, 4 : i64]]


// -----
func.func @swish(%x: tensor<4xf32>) -> tensor<4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 24 : i64} {
  %y = "onnx.Swish"(%x) {alpha = 5.000000e-01 : f32, onnx_node_name = "sw"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @swish(
// CHECK:           [[X:%[0-9]+]] = "krnl.load"
// CHECK-NEXT:      [[AL:%[0-9]+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      [[AX:%[0-9]+]] = arith.mulf [[AL]], [[X]] : f32
// CHECK:           [[E:%[0-9]+]] = math.exp
// CHECK:           [[SIG:%[0-9]+]] = arith.select
// CHECK-NEXT:      [[Y:%[0-9]+]] = arith.mulf [[X]], [[SIG]] : f32
// CHECK-NEXT:      "krnl.store"([[Y]]


// -----
func.func @rotary(%x: tensor<1x2x3x4xf32>, %c: tensor<1x3x2xf32>, %s: tensor<1x3x2xf32>) -> tensor<1x2x3x4xf32> attributes {input_names = ["x", "c", "s"], output_names = ["y"], onnx_opset = 23 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y = "onnx.RotaryEmbedding"(%x, %c, %s, %none) {onnx_node_name = "rope"} : (tensor<1x2x3x4xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>, none) -> tensor<1x2x3x4xf32>
  func.return %y : tensor<1x2x3x4xf32>
}
// CHECK-LABEL: func.func @rotary(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<1x2x3x4xf32>, [[C:%[0-9]+]]: memref<1x3x2xf32>, [[S:%[0-9]+]]: memref<1x3x2xf32>, [[Y:%[0-9]+]]: memref<1x2x3x4xf32>)
// CHECK:         ^bb0([[B:%[0-9]+]]: index, [[P:%[0-9]+]]: index, [[H:%[0-9]+]]: index, [[K:%[0-9]+]]: index):
// CHECK-NEXT:      [[CV:%[0-9]+]] = "krnl.load"([[C]], [[B]], [[P]], [[K]])
// CHECK-NEXT:      [[SV:%[0-9]+]] = "krnl.load"([[S]], [[B]], [[P]], [[K]])
// CHECK-NEXT:      [[TWO:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[K2:%[0-9]+]] = arith.addi [[K]], [[TWO]] : index
// CHECK-NEXT:      [[X1:%[0-9]+]] = "krnl.load"([[X]], [[B]], [[H]], [[P]], [[K]])
// CHECK-NEXT:      [[X2:%[0-9]+]] = "krnl.load"([[X]], [[B]], [[H]], [[P]], [[K2]])
// CHECK-NEXT:      [[A:%[0-9]+]] = arith.mulf [[CV]], [[X1]] : f32
// CHECK-NEXT:      [[D:%[0-9]+]] = arith.mulf [[SV]], [[X2]] : f32
// CHECK-NEXT:      [[RE:%[0-9]+]] = arith.subf [[A]], [[D]] : f32
// CHECK-NEXT:      [[E:%[0-9]+]] = arith.mulf [[SV]], [[X1]] : f32
// CHECK-NEXT:      [[F:%[0-9]+]] = arith.mulf [[CV]], [[X2]] : f32
// CHECK-NEXT:      [[IM:%[0-9]+]] = arith.addf [[E]], [[F]] : f32
// CHECK-NEXT:      "krnl.store"([[RE]], [[Y]], [[B]], [[H]], [[P]], [[K]])
// CHECK-NEXT:      "krnl.store"([[IM]], [[Y]], [[B]], [[H]], [[P]], [[K2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 3 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64]]


// -----
func.func @attention_gqa_causal(%q: tensor<1x4x2x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x4x2x8xf32> attributes {input_names = ["q", "k", "v"], output_names = ["y"], onnx_opset = 23 : i64} {
  %none = "onnx.NoValue"() : () -> none
  %y, %pk, %pv, %qk = "onnx.Attention"(%q, %k, %v, %none, %none, %none, %none) {is_causal = 1 : i64, onnx_node_name = "att"} : (tensor<1x4x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, none, none, none, none) -> (tensor<1x4x2x8xf32>, none, none, none)
  func.return %y : tensor<1x4x2x8xf32>
}
// CHECK-LABEL: func.func @attention_gqa_causal(
// CHECK-SAME:    [[Q:%[0-9]+]]: memref<1x4x2x8xf32>, [[K:%[0-9]+]]: memref<1x2x3x8xf32>, [[V:%[0-9]+]]: memref<1x2x3x8xf32>, [[Y:%[0-9]+]]: memref<1x4x2x8xf32>)
// CHECK:         [[SC:%[0-9]+]] = "krnl.alloc"() {{.*}} -> memref<1x4x2x3xf32>
// CHECK:         ^bb0([[N:%[0-9]+]]: index, [[G:%[0-9]+]]: index, [[R:%[0-9]+]]: index, [[I:%[0-9]+]]: index, [[J:%[0-9]+]]: index, [[D:%[0-9]+]]: index):
// CHECK-NEXT:      [[TWO:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[G2:%[0-9]+]] = arith.muli [[G]], [[TWO]] : index
// CHECK-NEXT:      [[H:%[0-9]+]] = arith.addi [[G2]], [[R]] : index
// CHECK-NEXT:      [[QV:%[0-9]+]] = "krnl.load"([[Q]], [[N]], [[H]], [[I]], [[D]])
// CHECK-NEXT:      [[RT:%[0-9]+]] = arith.constant 0.594603539 : f32
// CHECK-NEXT:      [[QS:%[0-9]+]] = arith.mulf [[QV]], [[RT]] : f32
// CHECK-NEXT:      [[KV:%[0-9]+]] = "krnl.load"([[K]], [[N]], [[G]], [[J]], [[D]])
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 1 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 8 : i64]]
// CHECK:         ^bb0([[N2:%[0-9]+]]: index, [[H2:%[0-9]+]]: index, [[I2:%[0-9]+]]: index, [[J2:%[0-9]+]]: index):
// CHECK-NEXT:      [[S:%[0-9]+]] = "krnl.load"([[SC]], [[N2]], [[H2]], [[I2]], [[J2]])
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      [[OK:%[0-9]+]] = arith.cmpi sle, [[J2]], [[I2]] : index
// CHECK:           [[CB:%[0-9]+]] = arith.select [[OK]], {{%[0-9]+}}, {{%[0-9]+}} : f32
// CHECK:           math.exp
// CHECK:           arith.cmpf oeq, {{%[0-9]+}}, {{%[0-9]+}} : f32
// CHECK:           arith.divf
// CHECK:         ^bb0([[N3:%[0-9]+]]: index, [[G3:%[0-9]+]]: index, [[R3:%[0-9]+]]: index, [[I3:%[0-9]+]]: index, [[D3:%[0-9]+]]: index, [[J3:%[0-9]+]]: index):
// CHECK:           [[P:%[0-9]+]] = "krnl.load"([[SC]], [[N3]], {{%[0-9]+}}, [[I3]], [[J3]])
// CHECK-NEXT:      [[VV:%[0-9]+]] = "krnl.load"([[V]], [[N3]], [[G3]], [[J3]], [[D3]])
// CHECK-NEXT:      arith.mulf [[P]], [[VV]] : f32
// CHECK:           "krnl.store"({{%[0-9]+}}, [[Y]], [[N3]], {{%[0-9]+}}, [[I3]], [[D3]])
