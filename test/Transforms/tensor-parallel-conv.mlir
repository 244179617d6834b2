// RUN: merak-opt %s -split-input-file -merak-tensor-parallel=tp=2 | FileCheck %s

// A CNN block as torchvision writes it (Conv -> BatchNorm -> ReLU ->
// MaxPool -> Conv): the first convolution column-parallel (its weight's
// output channels and its bias split), the batch norm's parameters and
// running statistics split with the channels, the second convolution
// row-parallel (its weight's input channels split); f (tp_identity) on the
// input, g (all_reduce tp sum) on the second convolution's output.
// CHECK-DAG: merak.param @c1.weight : tensor<4x3x3x3xf32> = {{.*}} : tensor<8x3x3x3xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @c1.bias : tensor<4xf32> = {{.*}} : tensor<8xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @bn.weight : tensor<4xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @bn.running_var : tensor<4xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @c2.weight : tensor<4x4x3x3xf32> = {{.*}} : tensor<4x8x3x3xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: %[[F:.*]] = merak.tp_identity %{{.*}} : tensor<2x3x6x6xf32>
// CHECK: merak.conv2d %[[F]], %{{.*}} bias %{{.*}} {{.*}} -> tensor<2x4x6x6xf32>
// CHECK: merak.batch_norm {{.*}} -> tensor<2x4x6x6xf32>
// CHECK: merak.relu %{{.*}} : tensor<2x4x6x6xf32>
// CHECK: merak.max_pool2d {{.*}} : tensor<2x4x6x6xf32> -> tensor<2x4x3x3xf32>
// CHECK: %[[C2:.*]] = merak.conv2d {{.*}} : (tensor<2x4x3x3xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %[[G:.*]] = merak.all_reduce %[[C2]] group = "tp" reduction = "sum"
// CHECK-NEXT: return %[[G]]
merak.param @c1.weight : tensor<8x3x3x3xf32> = dense<0.5> : tensor<8x3x3x3xf32>
merak.param @c1.bias : tensor<8xf32> = dense<0.25> : tensor<8xf32>
merak.param @bn.weight : tensor<8xf32> = dense<1.0> : tensor<8xf32>
merak.param @bn.bias : tensor<8xf32> = dense<0.0> : tensor<8xf32>
merak.param @bn.running_mean : tensor<8xf32> = dense<0.0> : tensor<8xf32>
merak.param @bn.running_var : tensor<8xf32> = dense<1.0> : tensor<8xf32>
merak.param @c2.weight : tensor<4x8x3x3xf32> = dense<0.5> : tensor<4x8x3x3xf32>
func.func @forward(%x: tensor<2x3x6x6xf32>) -> tensor<2x4x3x3xf32> {
  %w1 = merak.get_param @c1.weight : tensor<8x3x3x3xf32>
  %b1 = merak.get_param @c1.bias : tensor<8xf32>
  %c1 = merak.conv2d %x, %w1 bias %b1 strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x3x6x6xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<2x8x6x6xf32>
  %s = merak.get_param @bn.weight : tensor<8xf32>
  %b = merak.get_param @bn.bias : tensor<8xf32>
  %m = merak.get_param @bn.running_mean : tensor<8xf32>
  %v = merak.get_param @bn.running_var : tensor<8xf32>
  %n = merak.batch_norm %c1, %s, %b, %m, %v epsilon = 1.0e-05 {training} : (tensor<2x8x6x6xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x6x6xf32>
  %r = merak.relu %n : tensor<2x8x6x6xf32>
  %p = merak.max_pool2d %r kernel = [2, 2] strides = [2, 2] padding = [0, 0, 0, 0] dilations = [1, 1] : tensor<2x8x6x6xf32> -> tensor<2x8x3x3xf32>
  %w2 = merak.get_param @c2.weight : tensor<4x8x3x3xf32>
  %y = merak.conv2d %p, %w2 strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 1 : (tensor<2x8x3x3xf32>, tensor<4x8x3x3xf32>) -> tensor<2x4x3x3xf32>
  return %y : tensor<2x4x3x3xf32>
}

// -----

// A depthwise convolution (groups = channels: each group reads its own
// channel) keeps the channels split (MobileNet's and ConvNeXt's depthwise
// layers, Mamba's causal conv1d): the pointwise convolution before it is
// column-parallel, the depthwise one runs on each rank's channels (its
// weight split alike, groups = the local channels) and the one after it is
// row-parallel; the pooled Linears after it form an MLP of their own.
// CHECK-DAG: merak.param @c1.weight : tensor<4x3x1x1xf32> = {{.*}} : tensor<8x3x1x1xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @dw.weight : tensor<4x1x3x3xf32> = {{.*}} : tensor<8x1x3x3xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @c2.weight : tensor<4x4x1x1xf32> = {{.*}} : tensor<4x8x1x1xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @fc1 : tensor<4x4xf32> = {{.*}} : tensor<4x8xf32> {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @fc2 : tensor<4x4xf32> = {{.*}} : tensor<8x4xf32> {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-LABEL: func.func @forward
// CHECK: merak.conv2d %{{.*}}, %{{.*}} strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 4 : (tensor<2x4x4x4xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x4x4xf32>
// CHECK-COUNT-2: merak.all_reduce
merak.param @c1.weight : tensor<8x3x1x1xf32> = dense<0.5> : tensor<8x3x1x1xf32>
merak.param @dw.weight : tensor<8x1x3x3xf32> = dense<0.5> : tensor<8x1x3x3xf32>
merak.param @c2.weight : tensor<4x8x1x1xf32> = dense<0.5> : tensor<4x8x1x1xf32>
merak.param @fc1 : tensor<4x8xf32> = dense<0.5> : tensor<4x8xf32>
merak.param @fc2 : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
func.func @forward(%x: tensor<2x3x4x4xf32>) -> tensor<2x4xf32> {
  %w1 = merak.get_param @c1.weight : tensor<8x3x1x1xf32>
  %c1 = merak.conv2d %x, %w1 strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x4x4xf32>, tensor<8x3x1x1xf32>) -> tensor<2x8x4x4xf32>
  %wd = merak.get_param @dw.weight : tensor<8x1x3x3xf32>
  %d = merak.conv2d %c1, %wd strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 8 : (tensor<2x8x4x4xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x4x4xf32>
  %w2 = merak.get_param @c2.weight : tensor<4x8x1x1xf32>
  %c2 = merak.conv2d %d, %w2 strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x8x4x4xf32>, tensor<4x8x1x1xf32>) -> tensor<2x4x4x4xf32>
  %g = merak.reduce_mean %c2 axes = [2, 3] : tensor<2x4x4x4xf32> -> tensor<2x4xf32>
  %f1 = merak.get_param @fc1 : tensor<4x8xf32>
  %h = merak.matmul %g, %f1 : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %r = merak.relu %h : tensor<2x8xf32>
  %f2 = merak.get_param @fc2 : tensor<8x4xf32>
  %y = merak.matmul %r, %f2 : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// torch's dynamo exporter gives a bias=False convolution a zero bias, one
// splat constant shared by every convolution of that width: the column-
// parallel one gets a local splat; the row-parallel one's bias (a parameter
// here) is added once, after the sum, instead of on every rank.
// CHECK-DAG: merak.param @c1.weight : tensor<4x3x1x1xf32> = {{.*}} {merak.shard = #merak.shard<axis = 0, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @c2.weight : tensor<8x4x1x1xf32> = {{.*}} {merak.shard = #merak.shard<axis = 1, blocks = 1, parts = 2>}
// CHECK-DAG: merak.param @c2.bias : tensor<8xf32> = {{.*}} : tensor<8xf32>{{$}}
// CHECK-LABEL: func.func @forward
// CHECK: %[[Z:.*]] = merak.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: merak.conv2d %{{.*}}, %{{.*}} bias %[[Z]] {{.*}} -> tensor<2x4x4x4xf32>
// CHECK: %[[B2:.*]] = merak.get_param @c2.bias : tensor<8xf32>
// CHECK: %[[C2:.*]] = merak.conv2d %{{.*}}, %{{.*}} strides {{.*}} : (tensor<2x4x4x4xf32>, tensor<8x4x1x1xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[G:.*]] = merak.all_reduce %[[C2]] group = "tp"
// CHECK-NEXT: %[[BC:.*]] = merak.reshape %[[B2]] : tensor<8xf32> to tensor<8x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = merak.add %[[G]], %[[BC]] : tensor<2x8x4x4xf32>, tensor<8x1x1xf32>
// CHECK-NEXT: %[[R:.*]] = merak.relu %[[Y]]
// CHECK: merak.conv2d %[[R]], %{{.*}} bias %{{.*}} {{.*}} : (tensor<2x8x4x4xf32>, tensor<8x8x1x1xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
merak.param @c1.weight : tensor<8x3x1x1xf32> = dense<0.5> : tensor<8x3x1x1xf32>
merak.param @c2.weight : tensor<8x8x1x1xf32> = dense<0.5> : tensor<8x8x1x1xf32>
merak.param @c2.bias : tensor<8xf32> = dense<0.25> : tensor<8xf32>
merak.param @c3.weight : tensor<8x8x1x1xf32> = dense<0.5> : tensor<8x8x1x1xf32>
func.func @forward(%x: tensor<2x3x4x4xf32>) -> tensor<2x8x4x4xf32> {
  %z = merak.constant dense<0.0> : tensor<8xf32>
  %w1 = merak.get_param @c1.weight : tensor<8x3x1x1xf32>
  %c1 = merak.conv2d %x, %w1 bias %z strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x3x4x4xf32>, tensor<8x3x1x1xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
  %w2 = merak.get_param @c2.weight : tensor<8x8x1x1xf32>
  %b2 = merak.get_param @c2.bias : tensor<8xf32>
  %c2 = merak.conv2d %c1, %w2 bias %b2 strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x8x4x4xf32>, tensor<8x8x1x1xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
  %r = merak.relu %c2 : tensor<2x8x4x4xf32>
  %w3 = merak.get_param @c3.weight : tensor<8x8x1x1xf32>
  %c3 = merak.conv2d %r, %w3 bias %z strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<2x8x4x4xf32>, tensor<8x8x1x1xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
  return %c3 : tensor<2x8x4x4xf32>
}
