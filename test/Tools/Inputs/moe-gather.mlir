merak.param @w : tensor<4x6x5xf32> = dense<0.5> : tensor<4x6x5xf32>
func.func @forward(%x: tensor<8x5x1xf32> {merak.name = "x"}, %e: tensor<8xi64> {merak.name = "experts"}) -> (tensor<8x6x1xf32> {merak.name = "y"}) {
  %w = merak.get_param @w : tensor<4x6x5xf32>
  %g = merak.gather %w[%e] axis = 0 : tensor<4x6x5xf32>, tensor<8xi64> -> tensor<8x6x5xf32>
  %y = merak.matmul %g, %x : tensor<8x6x5xf32>, tensor<8x5x1xf32> -> tensor<8x6x1xf32>
  return %y : tensor<8x6x1xf32>
}
