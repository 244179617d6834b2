// The entry option of merak-autodiff (used by ../merak-autodiff.mlir):
// @train is differentiated into @train_grad; @forward is left alone.
// ENTRY-LABEL: func.func @forward(
// ENTRY-NOT: func.func @forward_grad
// ENTRY-LABEL: func.func @train(
// ENTRY-LABEL: func.func @train_grad(%arg0: tensor<2xf64>) -> (tensor<f64> {merak.name = "loss"}, tensor<2xf64> {merak.name = "grad:w"})
// ENTRY: merak.mul
// ENTRY-NOT: func.func @forward_grad
merak.param @w : tensor<2xf64> = dense<[0.5, -1.0]> : tensor<2xf64>
func.func @forward(%x: tensor<2xf64>) -> tensor<2xf64> {
  return %x : tensor<2xf64>
}
func.func @train(%x: tensor<2xf64>) -> tensor<f64> {
  %w = merak.get_param @w : tensor<2xf64>
  %0 = merak.mul %x, %w : tensor<2xf64>, tensor<2xf64>
  %l = merak.reduce_sum %0 axes = [0] : tensor<2xf64> -> tensor<f64>
  return %l : tensor<f64>
}
