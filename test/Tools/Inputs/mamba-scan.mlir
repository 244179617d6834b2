merak.param @a : tensor<4x2xf32> = dense<-0.5> : tensor<4x2xf32>
func.func @forward(%u: tensor<2x4x3xf32> {merak.name = "u"}, %dt: tensor<2x4x3xf32> {merak.name = "dt"}, %b: tensor<2x3x2xf32> {merak.name = "b"}, %c: tensor<2x3x2xf32> {merak.name = "c"}) -> (tensor<2x4x3xf32> {merak.name = "y"}) {
  %a = merak.get_param @a : tensor<4x2xf32>
  %a4 = merak.reshape %a : tensor<4x2xf32> to tensor<1x4x1x2xf32>
  %dt4 = merak.reshape %dt : tensor<2x4x3xf32> to tensor<2x4x3x1xf32>
  %z = merak.mul %a4, %dt4 : tensor<1x4x1x2xf32>, tensor<2x4x3x1xf32>
  %decay = merak.exp %z : tensor<2x4x3x2xf32>
  %b4 = merak.reshape %b : tensor<2x3x2xf32> to tensor<2x1x3x2xf32>
  %db = merak.mul %dt4, %b4 : tensor<2x4x3x1xf32>, tensor<2x1x3x2xf32>
  %u4 = merak.reshape %u : tensor<2x4x3xf32> to tensor<2x4x3x1xf32>
  %in = merak.mul %db, %u4 : tensor<2x4x3x2xf32>, tensor<2x4x3x1xf32>
  %h = merak.linear_scan %decay, %in axis = 2 : tensor<2x4x3x2xf32>
  %c4 = merak.reshape %c : tensor<2x3x2xf32> to tensor<2x1x3x2xf32>
  %p = merak.mul %h, %c4 : tensor<2x4x3x2xf32>, tensor<2x1x3x2xf32>
  %y = merak.reduce_sum %p axes = [3] : tensor<2x4x3x2xf32> -> tensor<2x4x3xf32>
  return %y : tensor<2x4x3xf32>
}
