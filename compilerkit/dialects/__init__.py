"""The two IR levels of compilerkit: ONNX IR (`onnx`) and Kernel IR (`krnl`)."""
