// moe-lm.mlir with its expert rows weighted by the router's probability
// of the chosen expert (the max of the softmax), as transformers weights
// them: a model merak-moe-capacity can drop rows of. For merak-compile
// --moe-capacity-factor tests.
module {
  merak.param @emb : tensor<8x4xf32> = dense<[[0.1, -0.2, 0.3, 0.05], [0.4, 0.1, -0.3, 0.2], [-0.1, 0.5, 0.2, -0.4], [0.3, -0.3, 0.1, 0.6], [0.2, 0.2, -0.5, 0.1], [-0.6, 0.1, 0.4, 0.3], [0.5, -0.1, -0.2, -0.3], [0.05, 0.3, 0.6, -0.2]]> : tensor<8x4xf32>
  merak.param @router : tensor<4x2xf32> = dense<[[0.5, -0.5], [-0.3, 0.3], [0.2, -0.1], [-0.4, 0.6]]> : tensor<4x2xf32>
  merak.param @experts : tensor<2x4x4xf32> = dense<[[[0.1, 0.2, -0.1, 0.3], [0.2, -0.3, 0.4, 0.1], [-0.2, 0.1, 0.3, -0.4], [0.3, 0.05, -0.2, 0.2]], [[-0.3, 0.1, 0.2, 0.4], [0.1, 0.4, -0.2, -0.1], [0.2, -0.2, 0.1, 0.3], [-0.1, 0.3, 0.4, 0.05]]]> : tensor<2x4x4xf32>
  merak.param @out : tensor<4x8xf32> = dense<0.125> : tensor<4x8xf32>
  func.func @forward(%ids: tensor<4x4xi64> {merak.name = "ids"}) -> (tensor<4x4x8xf32> {merak.name = "logits"}) {
    %emb = merak.get_param @emb : tensor<8x4xf32>
    %router = merak.get_param @router : tensor<4x2xf32>
    %w = merak.get_param @experts : tensor<2x4x4xf32>
    %out = merak.get_param @out : tensor<4x8xf32>
    %h = merak.gather %emb[%ids] axis = 0 : tensor<8x4xf32>, tensor<4x4xi64> -> tensor<4x4x4xf32>
    %rows = merak.reshape %h : tensor<4x4x4xf32> to tensor<16x4xf32>
    %scores = merak.matmul %rows, %router : tensor<16x4xf32>, tensor<4x2xf32> -> tensor<16x2xf32>
    %e = merak.argmax %scores axis = 1 : tensor<16x2xf32> -> tensor<16xi64>
    %y = merak.expert_matmul %rows, %w[%e] : tensor<16x4xf32>, tensor<2x4x4xf32>, tensor<16xi64> -> tensor<16x4xf32>
    %probs = merak.softmax %scores axis = 1 : tensor<16x2xf32>
    %g = merak.reduce_max %probs axes = [1] {keepdims} : tensor<16x2xf32> -> tensor<16x1xf32>
    %yg = merak.mul %y, %g : tensor<16x4xf32>, tensor<16x1xf32>
    %r = merak.add %rows, %yg : tensor<16x4xf32>, tensor<16x4xf32>
    %r3 = merak.reshape %r : tensor<16x4xf32> to tensor<4x4x4xf32>
    %logits = merak.matmul %r3, %out : tensor<4x4x4xf32>, tensor<4x8xf32> -> tensor<4x4x8xf32>
    return %logits : tensor<4x4x8xf32>
  }
}
