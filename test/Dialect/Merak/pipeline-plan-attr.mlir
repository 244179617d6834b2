// RUN: merak-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// The pipeline plan is a typed attribute: it prints and parses with its
// named fields, the optional ones (the recomputation merak-recompute
// records, the schedule merak-record-schedule records) only when set and
// virtual_stages only when not 1.
// CHECK: module attributes {merak.pipeline = #merak.pipeline_plan<stages = 4, microbatches = 8, cut_points = 5, cuts = [1, 2, 4], costs = [10, 20, 30, 40], owners = {{\[}}["a"], ["b"], ["c"], ["a", "d"]], virtual_stages = 2, memory_estimate = [100, 90, 80, 70], recompute = ["full", "selective", "none", "none"], scp_kept = [3, 2, 1, 0], stash_bytes = [0, 8, 16, 16], schedule = "interleaved">}
module attributes {merak.pipeline = #merak.pipeline_plan<stages = 4, microbatches = 8, cut_points = 5, cuts = [1, 2, 4], costs = [10, 20, 30, 40], owners = [["a"], ["b"], ["c"], ["a", "d"]], virtual_stages = 2, memory_estimate = [100, 90, 80, 70], recompute = ["full", "selective", "none", "none"], scp_kept = [3, 2, 1, 0], stash_bytes = [0, 8, 16, 16], schedule = "interleaved">} {
}

// -----

// CHECK: module attributes {merak.pipeline = #merak.pipeline_plan<stages = 2, microbatches = 1, cut_points = 3, cuts = [2], costs = [5, 6], owners = {{\[}}["a"], ["b"]]>}
module attributes {merak.pipeline = #merak.pipeline_plan<stages = 2, microbatches = 1, cut_points = 3, cuts = [2], costs = [5, 6], owners = [["a"], ["b"]], virtual_stages = 1>} {
}

// -----

// expected-error @+1 {{struct is missing required parameter: costs}}
module attributes {merak.pipeline = #merak.pipeline_plan<stages = 2, microbatches = 1, cut_points = 3, cuts = [2], owners = [["a"], ["b"]]>} {
}
