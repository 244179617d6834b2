merak.param @wte : tensor<16x8xf32> = dense<[[-0.524, 0.088, -0.260, 0.208, 0.251, -0.869, -0.974, 0.675], [-0.481, -0.531, 0.991, -0.059, 0.673, -0.047, 0.278, -0.699], [0.270, 0.736, 0.046, 0.483, 0.343, -0.872, 0.516, 0.182], [-0.397, -0.938, 0.731, -0.055, 0.438, 0.758, 0.428, 0.842], [-0.210, 0.602, -0.111, 0.871, 0.758, -0.805, -0.728, -0.566], [0.931, -0.128, 0.253, -0.398, 0.014, -0.228, -0.298, 0.170], [0.169, 0.808, 0.364, 0.858, 0.713, 0.982, 0.343, -0.674], [0.721, 0.929, 0.809, 0.138, 0.428, -0.578, 0.663, 0.147], [-0.430, -0.873, 0.708, 0.980, -0.823, 0.601, -0.179, -0.698], [-0.412, 0.538, 0.746, -0.912, 0.229, -0.910, 0.437, -0.338], [0.762, 0.961, 0.011, 0.997, -0.381, -0.846, 0.200, -0.937], [-0.605, -0.184, 0.221, -0.688, -0.915, 0.736, -0.372, 0.917], [0.793, -0.244, -0.079, 0.040, 0.288, 0.191, 0.119, 0.240], [0.881, 0.014, -0.138, 0.441, -0.525, -0.398, 0.956, 0.042], [0.097, -0.977, -0.170, 0.160, -0.960, 0.232, 0.264, -0.880], [0.255, -0.067, 0.359, -0.295, 0.414, 0.476, -0.956, -0.879]]> : tensor<16x8xf32>
func.func @forward(%ids: tensor<4x3xi64> {merak.name = "input_ids"}) -> tensor<4x2x3x3xf32> {
  %wte = merak.get_param @wte : tensor<16x8xf32>
  %x = merak.gather %wte[%ids] axis = 0 : tensor<16x8xf32>, tensor<4x3xi64> -> tensor<4x3x8xf32>
  %h = merak.reshape %x : tensor<4x3x8xf32> to tensor<4x3x2x4xf32>
  %q = merak.transpose %h perm = [0, 2, 1, 3] : tensor<4x3x2x4xf32> to tensor<4x2x3x4xf32>
  %k = merak.transpose %h perm = [0, 2, 3, 1] : tensor<4x3x2x4xf32> to tensor<4x2x4x3xf32>
  %s = merak.matmul %q, %k : tensor<4x2x3x4xf32>, tensor<4x2x4x3xf32> -> tensor<4x2x3x3xf32>
  %b = merak.constant dense<[[[[0]]], [[[1]]], [[[2]]], [[[3]]]]> : tensor<4x1x1x1xi64>
  %t = merak.constant dense<[[[[0, 1, 2]]]]> : tensor<1x1x1x3xi64>
  %len = merak.constant dense<3> : tensor<i64>
  %row = merak.mul %b, %len : tensor<4x1x1x1xi64>, tensor<i64>
  %flat = merak.add %row, %t : tensor<4x1x1x1xi64>, tensor<1x1x1x3xi64>
  %pad = merak.constant dense<true> : tensor<12xi1>
  %padm = merak.gather %pad[%flat] axis = 0 : tensor<12xi1>, tensor<4x1x1x3xi64> -> tensor<4x1x1x3xi1>
  %causal = merak.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %keep = merak.and %causal, %padm : tensor<1x1x3x3xi1>, tensor<4x1x1x3xi1>
  %zero = merak.constant dense<0.0> : tensor<f32>
  %ninf = merak.constant dense<0xFF800000> : tensor<f32>
  %bias = merak.where %keep, %zero, %ninf : tensor<4x1x3x3xi1>, tensor<f32>, tensor<f32>
  %m = merak.add %s, %bias : tensor<4x2x3x3xf32>, tensor<4x1x3x3xf32>
  %p = merak.softmax %m axis = 3 : tensor<4x2x3x3xf32>
  return %p : tensor<4x2x3x3xf32>
}