// RUN: python -m compilerkit.opt --split-input-file -p lower-to-krnl %s | filecheck %s
// Softmax and LogSoftmax (lowering/norm.py) on an [outer, D, inner] view of x and y
// (krnl.reshape, no copy): three nests. (1) m[o, i] = max over d of x, from -inf; (2)
// e = exp(x - m) stored in y and summed into s[o, i] from 0; (3) y = e * (1 / s) (the
// reciprocal is loop-invariant: LLVM computes it once per row), or for LogSoftmax
// y = (x - m) - log(s). Subtracting the max first keeps exp from overflowing. Opset 13
// normalises along one axis (default -1); before 13 the input is flattened to 2-D at `axis`
// (default 1).

// Opset 13, [2, 5], axis -1: outer 2, D 5, inner 1.
func.func @softmax_last_axis(%x: tensor<2x5xf32>) -> tensor<2x5xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Softmax"(%x) {onnx_node_name = "sm"} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  func.return %y : tensor<2x5xf32>
}
// CHECK-LABEL: func.func @softmax_last_axis(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x5xf32>, [[Y:%[0-9]+]]: memref<2x5xf32>)
// CHECK-NEXT:    [[XV:%[0-9]+]] = "krnl.reshape"([[X]]) {{.*}} -> memref<2x5x1xf32>
// CHECK-NEXT:    [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {{.*}} -> memref<2x5x1xf32>
// CHECK-NEXT:    [[MX:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sm"} : () -> memref<2x1xf32>
// CHECK-NEXT:    [[SUM:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sm"} : () -> memref<2x1xf32>
// CHECK:         ^bb0([[F0:%[0-9]+]]: index, [[F1:%[0-9]+]]: index):
// CHECK-NEXT:      [[NINF:%[0-9]+]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:      "krnl.store"([[NINF]], [[MX]], [[F0]], [[F1]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 1 : i64]]
// CHECK:         ^bb0([[G0:%[0-9]+]]: index, [[G1:%[0-9]+]]: index):
// CHECK-NEXT:      [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      "krnl.store"([[Z]], [[SUM]], [[G0]], [[G1]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 1 : i64]]
// Pass 1: the running max.
// CHECK:         ^bb0([[O:%[0-9]+]]: index, [[K:%[0-9]+]]: index, [[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[M:%[0-9]+]] = "krnl.load"([[MX]], [[O]], [[I]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[XV]], [[O]], [[K]], [[I]])
// CHECK-NEXT:      [[MM:%[0-9]+]] = arith.maximumf [[M]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[MM]], [[MX]], [[O]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 5 : i64], [0 : i64, 1 : i64]]
// Pass 2: exp(x - max), kept in y and summed.
// CHECK:         ^bb0([[O2:%[0-9]+]]: index, [[K2:%[0-9]+]]: index, [[I2:%[0-9]+]]: index):
// CHECK-NEXT:      [[V2:%[0-9]+]] = "krnl.load"([[XV]], [[O2]], [[K2]], [[I2]])
// CHECK-NEXT:      [[M2:%[0-9]+]] = "krnl.load"([[MX]], [[O2]], [[I2]])
// CHECK-NEXT:      [[D:%[0-9]+]] = arith.subf [[V2]], [[M2]] : f32
// CHECK-NEXT:      [[E:%[0-9]+]] = math.exp [[D]] : f32
// CHECK-NEXT:      "krnl.store"([[E]], [[YV]], [[O2]], [[K2]], [[I2]])
// CHECK-NEXT:      [[S:%[0-9]+]] = "krnl.load"([[SUM]], [[O2]], [[I2]])
// CHECK-NEXT:      [[S2:%[0-9]+]] = arith.addf [[S]], [[E]] : f32
// CHECK-NEXT:      "krnl.store"([[S2]], [[SUM]], [[O2]], [[I2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 5 : i64], [0 : i64, 1 : i64]]
// Pass 3: normalise.
// CHECK:         ^bb0([[O3:%[0-9]+]]: index, [[K3:%[0-9]+]]: index, [[I3:%[0-9]+]]: index):
// CHECK-NEXT:      [[E3:%[0-9]+]] = "krnl.load"([[YV]], [[O3]], [[K3]], [[I3]])
// CHECK-NEXT:      [[S3:%[0-9]+]] = "krnl.load"([[SUM]], [[O3]], [[I3]])
// CHECK-NEXT:      [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      [[INV:%[0-9]+]] = arith.divf [[ONE]], [[S3]] : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.mulf [[E3]], [[INV]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[YV]], [[O3]], [[K3]], [[I3]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 5 : i64], [0 : i64, 1 : i64]]
// CHECK-NEXT:    func.return

// -----
// Opset 13, [2, 3, 4], axis 1: outer 2, D 3, inner 4 -- the view is x's own shape, so no
// reshape; the max and sum buffers are [2, 4].
func.func @softmax_middle_axis(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.Softmax"(%x) {axis = 1 : i64, onnx_node_name = "sm"} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @softmax_middle_axis(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x4xf32>, [[Y:%[0-9]+]]: memref<2x3x4xf32>)
// CHECK-NOT:     krnl.reshape
// CHECK:         [[MX:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sm"} : () -> memref<2x4xf32>
// CHECK-NEXT:    [[SUM:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sm"} : () -> memref<2x4xf32>
// CHECK:         [[NINF:%[0-9]+]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:    "krnl.store"([[NINF]], [[MX]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64]]
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[SUM]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 4 : i64]]
// CHECK:         ^bb0([[O:%[0-9]+]]: index, [[K:%[0-9]+]]: index, [[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[M:%[0-9]+]] = "krnl.load"([[MX]], [[O]], [[I]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[X]], [[O]], [[K]], [[I]])
// CHECK-NEXT:      [[MM:%[0-9]+]] = arith.maximumf [[M]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[MM]], [[MX]], [[O]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]
// CHECK:         ^bb0([[O2:%[0-9]+]]: index, [[K2:%[0-9]+]]: index, [[I2:%[0-9]+]]: index):
// CHECK-NEXT:      [[V2:%[0-9]+]] = "krnl.load"([[X]], [[O2]], [[K2]], [[I2]])
// CHECK-NEXT:      [[M2:%[0-9]+]] = "krnl.load"([[MX]], [[O2]], [[I2]])
// CHECK-NEXT:      [[D:%[0-9]+]] = arith.subf [[V2]], [[M2]] : f32
// CHECK-NEXT:      [[E:%[0-9]+]] = math.exp [[D]] : f32
// CHECK-NEXT:      "krnl.store"([[E]], [[Y]], [[O2]], [[K2]], [[I2]])
// CHECK-NEXT:      [[S:%[0-9]+]] = "krnl.load"([[SUM]], [[O2]], [[I2]])
// CHECK-NEXT:      [[S2:%[0-9]+]] = arith.addf [[S]], [[E]] : f32
// CHECK-NEXT:      "krnl.store"([[S2]], [[SUM]], [[O2]], [[I2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]
// CHECK:         ^bb0([[O3:%[0-9]+]]: index, [[K3:%[0-9]+]]: index, [[I3:%[0-9]+]]: index):
// CHECK-NEXT:      [[E3:%[0-9]+]] = "krnl.load"([[Y]], [[O3]], [[K3]], [[I3]])
// CHECK-NEXT:      [[S3:%[0-9]+]] = "krnl.load"([[SUM]], [[O3]], [[I3]])
// CHECK-NEXT:      [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      [[INV:%[0-9]+]] = arith.divf [[ONE]], [[S3]] : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.mulf [[E3]], [[INV]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[Y]], [[O3]], [[K3]], [[I3]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 3 : i64], [0 : i64, 4 : i64]]
// CHECK-NEXT:    func.return

// -----
// Opset 11, [2, 3, 4], default axis 1: the input is flattened to [2, 12] -- D = 12, inner 1,
// one max per batch row over all 12 elements.
func.func @softmax_opset11_flatten(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 11 : i64} {
  %y = "onnx.Softmax"(%x) {onnx_node_name = "sm11"} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @softmax_opset11_flatten(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<2x3x4xf32>, [[Y:%[0-9]+]]: memref<2x3x4xf32>)
// CHECK-NEXT:    [[XV:%[0-9]+]] = "krnl.reshape"([[X]]) {{.*}} -> memref<2x12x1xf32>
// CHECK-NEXT:    [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {{.*}} -> memref<2x12x1xf32>
// CHECK-NEXT:    [[MX:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sm11"} : () -> memref<2x1xf32>
// CHECK-NEXT:    [[SUM:%[0-9]+]] = "krnl.alloc"() {onnx_node = "sm11"} : () -> memref<2x1xf32>
// CHECK:         ^bb0([[O:%[0-9]+]]: index, [[K:%[0-9]+]]: index, [[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[M:%[0-9]+]] = "krnl.load"([[MX]], [[O]], [[I]])
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[XV]], [[O]], [[K]], [[I]])
// CHECK-NEXT:      [[MM:%[0-9]+]] = arith.maximumf [[M]], [[V]] : f32
// CHECK-NEXT:      "krnl.store"([[MM]], [[MX]], [[O]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 12 : i64], [0 : i64, 1 : i64]]
// CHECK:         ^bb0([[O2:%[0-9]+]]: index, [[K2:%[0-9]+]]: index, [[I2:%[0-9]+]]: index):
// CHECK-NEXT:      [[V2:%[0-9]+]] = "krnl.load"([[XV]], [[O2]], [[K2]], [[I2]])
// CHECK-NEXT:      [[M2:%[0-9]+]] = "krnl.load"([[MX]], [[O2]], [[I2]])
// CHECK-NEXT:      [[D:%[0-9]+]] = arith.subf [[V2]], [[M2]] : f32
// CHECK-NEXT:      [[E:%[0-9]+]] = math.exp [[D]] : f32
// CHECK-NEXT:      "krnl.store"([[E]], [[YV]], [[O2]], [[K2]], [[I2]])
// CHECK-NEXT:      [[S:%[0-9]+]] = "krnl.load"([[SUM]], [[O2]], [[I2]])
// CHECK-NEXT:      [[S2:%[0-9]+]] = arith.addf [[S]], [[E]] : f32
// CHECK-NEXT:      "krnl.store"([[S2]], [[SUM]], [[O2]], [[I2]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 12 : i64], [0 : i64, 1 : i64]]
// CHECK:         ^bb0([[O3:%[0-9]+]]: index, [[K3:%[0-9]+]]: index, [[I3:%[0-9]+]]: index):
// CHECK-NEXT:      [[E3:%[0-9]+]] = "krnl.load"([[YV]], [[O3]], [[K3]], [[I3]])
// CHECK-NEXT:      [[S3:%[0-9]+]] = "krnl.load"([[SUM]], [[O3]], [[I3]])
// CHECK-NEXT:      [[ONE:%[0-9]+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      [[INV:%[0-9]+]] = arith.divf [[ONE]], [[S3]] : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.mulf [[E3]], [[INV]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[YV]], [[O3]], [[K3]], [[I3]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 2 : i64], [0 : i64, 12 : i64], [0 : i64, 1 : i64]]
// CHECK-NEXT:    func.return

// -----
// LogSoftmax, opset 13, [3, 4]: pass 3 computes (x - max) - log(sum).
func.func @log_softmax(%x: tensor<3x4xf32>) -> tensor<3x4xf32> attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
  %y = "onnx.LogSoftmax"(%x) {onnx_node_name = "lsm"} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}
// CHECK-LABEL: func.func @log_softmax(
// CHECK-SAME:    [[X:%[0-9]+]]: memref<3x4xf32>, [[Y:%[0-9]+]]: memref<3x4xf32>)
// CHECK-NEXT:    [[XV:%[0-9]+]] = "krnl.reshape"([[X]]) {{.*}} -> memref<3x4x1xf32>
// CHECK-NEXT:    [[YV:%[0-9]+]] = "krnl.reshape"([[Y]]) {{.*}} -> memref<3x4x1xf32>
// CHECK-NEXT:    [[MX:%[0-9]+]] = "krnl.alloc"
// CHECK-NEXT:    [[SUM:%[0-9]+]] = "krnl.alloc"
// CHECK:         [[NINF:%[0-9]+]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:    "krnl.store"([[NINF]], [[MX]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 1 : i64]]
// CHECK:         [[Z:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    "krnl.store"([[Z]], [[SUM]],
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 1 : i64]]
// CHECK:         arith.maximumf
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 4 : i64], [0 : i64, 1 : i64]]
// CHECK:         math.exp
// CHECK:         }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 4 : i64], [0 : i64, 1 : i64]]
// CHECK:         ^bb0([[O:%[0-9]+]]: index, [[K:%[0-9]+]]: index, [[I:%[0-9]+]]: index):
// CHECK-NEXT:      [[V:%[0-9]+]] = "krnl.load"([[XV]], [[O]], [[K]], [[I]])
// CHECK-NEXT:      [[M:%[0-9]+]] = "krnl.load"([[MX]], [[O]], [[I]])
// CHECK-NEXT:      [[SH:%[0-9]+]] = arith.subf [[V]], [[M]] : f32
// CHECK-NEXT:      [[S:%[0-9]+]] = "krnl.load"([[SUM]], [[O]], [[I]])
// CHECK-NEXT:      [[L:%[0-9]+]] = math.log [[S]] : f32
// CHECK-NEXT:      [[R:%[0-9]+]] = arith.subf [[SH]], [[L]] : f32
// CHECK-NEXT:      "krnl.store"([[R]], [[YV]], [[O]], [[K]], [[I]])
// CHECK-NEXT:    }) {bounds = {{\[\[}}0 : i64, 3 : i64], [0 : i64, 4 : i64], [0 : i64, 1 : i64]]
// CHECK-NOT:     arith.divf
// CHECK:         func.return
