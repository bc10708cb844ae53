// RUN: python -m compilerkit.opt -p lower-to-krnl %s | filecheck %s
// Guards of conditional regions (lowering/guards.py). The frontend unrolls an If whose
// condition is computed at run time into both branches and a Where (frontend/control_flow.py),
// tagging each branch's ops with `onnx_guards` (the condition's key; "!c": the else branch) and
// the Where with `onnx_guard`. A tagged op's run-time checks pass when its branch is not taken
// (ok or not taken), and its integer divisions divide by 1 there, so `If(i < n) then
// Gather(x, i)` never reports for i = n. The condition's buffer is read inside the nests.

func.func @guarded_if(%x: tensor<4xf32>, %i: tensor<i64>, %a: tensor<2xi64>, %d: tensor<2xi64>, %c: tensor<i1>) -> (tensor<f32>, tensor<2xi64>) attributes {input_names = ["x", "i", "a", "d", "c"], output_names = ["y", "q"], onnx_opset = 17 : i64} {
  %g = "onnx.Gather"(%x, %i) {axis = 0 : i64, onnx_node_name = "if/then/gather", onnx_guards = ["c"]} : (tensor<4xf32>, tensor<i64>) -> tensor<f32>
  %z = "onnx.Constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %y = "onnx.Where"(%c, %g, %z) {onnx_node_name = "if/select", onnx_guard = "c"} : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
  %q = "onnx.Div"(%a, %d) {onnx_node_name = "if/else/div", onnx_guards = ["!c"]} : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  func.return %y, %q : tensor<f32>, tensor<2xi64>
}
// CHECK-LABEL: func.func @guarded_if(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<4xf32>, [[I:%[0-9]+]]: memref<i64>, [[A:%[0-9]+]]: memref<2xi64>, [[D:%[0-9]+]]: memref<2xi64>, [[C:%[0-9]+]]: memref<i1>,
// The then branch's Gather: its index check passes when the condition is false.
// CHECK:           [[OK:%[0-9]+]] = arith.andi {{%[0-9]+}}, {{%[0-9]+}} : i1
// CHECK-NEXT:      [[TAKEN:%[0-9]+]] = "krnl.load"([[C]]) : (memref<i1>) -> i1
// CHECK-NEXT:      [[TRUE:%[0-9]+]] = arith.constant true
// CHECK-NEXT:      [[UNTAKEN:%[0-9]+]] = arith.xori [[TAKEN]], [[TRUE]] : i1
// CHECK-NEXT:      [[PASS:%[0-9]+]] = arith.ori [[OK]], [[UNTAKEN]] : i1
// CHECK-NEXT:      "krnl.check"([[PASS]]) {message = "node 'if/then/gather' (Gather): an index on axis 0 is out of range
// The Where selects by the same buffer.
// CHECK:           "krnl.load"([[C]]) : (memref<i1>) -> i1
// CHECK-NEXT:      "krnl.load"
// CHECK-NEXT:      "krnl.load"
// CHECK-NEXT:      arith.select
// The else branch's division ("!c": taken when c is false) divides by 1 when c is true.
// CHECK:           [[AV:%[0-9]+]] = "krnl.load"([[A]], {{%[0-9]+}})
// CHECK-NEXT:      [[DV:%[0-9]+]] = "krnl.load"([[D]], {{%[0-9]+}})
// CHECK-NEXT:      [[CV:%[0-9]+]] = "krnl.load"([[C]]) : (memref<i1>) -> i1
// CHECK-NEXT:      [[T2:%[0-9]+]] = arith.constant true
// CHECK-NEXT:      [[ELSE:%[0-9]+]] = arith.xori [[CV]], [[T2]] : i1
// CHECK-NEXT:      [[ONE:%[0-9]+]] = arith.constant 1 : i64
// CHECK-NEXT:      [[SAFE:%[0-9]+]] = arith.select [[ELSE]], [[DV]], [[ONE]] : i64
// CHECK-NEXT:      arith.divsi [[AV]], [[SAFE]] : i64
