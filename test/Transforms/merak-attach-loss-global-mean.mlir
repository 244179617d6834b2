// RUN: merak-opt %s -merak-attach-loss=global-mean=true -o %t.mlir
// RUN: FileCheck %s --input-file %t.mlir
//
// Zero logits over 5 classes: every counted label costs log 5. The step's
// 8 counted labels lie 3 in piece A, 5 in piece B and none in piece C
// (padding only); label_count = 8 / 2 for the two pieces A and B, which
// weigh their means log 5 by 3/4 and 5/4 (their average is the step's
// mean, log 5), and 8 / 3 when C is a third piece: C's mean (0/0) counts 0.
// RUN: %python -c "import numpy as np, sys; d = sys.argv[1]; \
// RUN:   np.save(d + '-x.npy', np.zeros((2, 4, 5), np.float32)); \
// RUN:   np.save(d + '-a.npy', np.array([[1, -100, 2, -100], [-100, 4, -100, -100]], np.int64)); \
// RUN:   np.save(d + '-b.npy', np.array([[0, 1, 2, 3], [-100, -100, 4, -100]], np.int64)); \
// RUN:   np.save(d + '-c.npy', np.full((2, 4), -100, np.int64)); \
// RUN:   [np.save(d + '-n' + k + '.npy', np.array(n, np.float32)) for k, n in (('2', 4), ('3', 8 / 3))]; \
// RUN:   [np.save(d + '-want-' + k + '.npy', np.array(v * np.log(5), np.float32)) \
// RUN:    for k, v in (('a', 3 / 4), ('b', 5 / 4), ('c', 0.0), ('a3', 9 / 8))]" %t
// RUN: merak-run %t.mlir --entry loss --input %t-x.npy --input %t-a.npy --input %t-n2.npy \
// RUN:   --expect %t-want-a.npy --rtol 1e-6 | FileCheck %s --check-prefix=OK
// RUN: merak-run %t.mlir --entry loss --input %t-x.npy --input %t-b.npy --input %t-n2.npy \
// RUN:   --expect %t-want-b.npy --rtol 1e-6 | FileCheck %s --check-prefix=OK
// RUN: merak-run %t.mlir --entry loss --input %t-x.npy --input %t-c.npy --input %t-n3.npy \
// RUN:   --expect %t-want-c.npy --atol 0 | FileCheck %s --check-prefix=OK
// RUN: merak-run %t.mlir --entry loss --input %t-x.npy --input %t-a.npy --input %t-n3.npy \
// RUN:   --expect %t-want-a3.npy --rtol 1e-6 | FileCheck %s --check-prefix=OK
// OK: output 0 'loss' matches

// CHECK-LABEL: func.func @loss
// CHECK-SAME: %[[L:[a-z0-9]+]]: tensor<2x4xi64> {merak.ignore_index = -100 : i64, merak.index_limit = 5 : i64, merak.name = "labels"}
// CHECK-SAME: %[[C:[a-z0-9]+]]: tensor<f32> {merak.name = "label_count"}
// CHECK: %[[CE:.*]] = merak.cross_entropy %{{.*}}, %[[L]] axis = 2 reduction = "mean"
// CHECK: %[[IGN:.*]] = merak.constant dense<-100> : tensor<i64>
// CHECK: %[[CNT:.*]] = merak.ne %[[L]], %[[IGN]]
// CHECK: %[[ONES:.*]] = merak.cast %[[CNT]] : tensor<2x4xi1> to tensor<2x4xf32>
// CHECK: %[[N:.*]] = merak.reduce_sum %[[ONES]] axes = [0, 1]
// CHECK: %[[W:.*]] = merak.div %[[N]], %[[C]]
// CHECK: %[[SOME:.*]] = merak.gt %[[N]],
// CHECK: %[[MEAN:.*]] = merak.where %[[SOME]], %[[CE]],
// CHECK: %[[LOSS:.*]] = merak.mul %[[MEAN]], %[[W]]
// CHECK: return %[[LOSS]] : tensor<f32>
func.func @forward(%x: tensor<2x4x5xf32> {merak.name = "x"}) -> (tensor<2x4x5xf32> {merak.name = "logits"}) {
  return %x : tensor<2x4x5xf32>
}
