// RUN: merak-opt --merak-split-emitc-functions=max-calls=2 %s | FileCheck %s
// RUN: merak-opt --merak-split-emitc-functions=max-calls=2 %s | mlir-translate --mlir-to-cpp | FileCheck %s --check-prefix=CPP
// RUN: not merak-opt --merak-split-emitc-functions=max-calls=0 %s 2>&1 | FileCheck %s --check-prefix=ERR

// ERR: max-calls must be at least 1, not 0

!p = !emitc.ptr<!emitc.opaque<"char">>
!cp = !emitc.ptr<!emitc.opaque<"const char">>

// Five calls in parts of two; a part computes again the pointers an earlier
// part defined (v1 + 64, v3 + 8), from its own arguments. The calls keep
// their order and arguments. @step_part0 exists, so the first new part is
// named apart from it.
// CPP-LABEL: void step_part0(char* v1) {
// CPP: static void step_part0_0(char* v1, char* v2, const char* v3) {
// CPP-NEXT:   char* v4 = v1 + 64;
// CPP-NEXT:   k0(v4);
// CPP-NEXT:   const char* v5 = v3 + 8;
// CPP-NEXT:   k1(v4, v5);
// CPP-NEXT:   return;
// CPP: static void step_part1(char* v1, char* v2, const char* v3) {
// CPP-DAG:    const char* [[C8:v[0-9]+]] = v3 + 8;
// CPP-DAG:    char* [[A64:v[0-9]+]] = v1 + 64;
// CPP:        k2(v2, [[C8]]);
// CPP-NEXT:   k3(7, [[A64]]);
// CPP-NEXT:   return;
// CPP: static void step_part2(char* v1, char* v2, const char* v3) {
// CPP-NEXT:   k4();
// CPP: extern "C" void step(char* v1, char* v2, const char* v3) {
// CPP-NEXT:   step_part0_0(v1, v2, v3);
// CPP-NEXT:   step_part1(v1, v2, v3);
// CPP-NEXT:   step_part2(v1, v2, v3);
// CPP-NEXT:   return;
emitc.func @step_part0(%a: !p) {
  return
}
emitc.func @step(%a: !p, %b: !p, %c: !cp) attributes {specifiers = ["extern \22C\22"]} {
  %0 = literal "64" : i64
  %1 = add %a, %0 : (!p, i64) -> !p
  call_opaque "k0"(%1) : (!p) -> ()
  %2 = literal "8" : i64
  %3 = add %c, %2 : (!cp, i64) -> !cp
  call_opaque "k1"(%1, %3) : (!p, !cp) -> ()
  call_opaque "k2"(%b, %3) : (!p, !cp) -> ()
  call_opaque "k3"(%1) {args = [#emitc.opaque<"7">, 0 : index]} : (!p) -> ()
  call_opaque "k4"() : () -> ()
  return
}

// A pipeline fragment's IO table entry is read again in the later part.
// CHECK-LABEL: emitc.func @fragment_part1(
// CHECK-SAME:    %[[IO:arg[0-9]+]]: !emitc.ptr<!emitc.ptr<!emitc.opaque<"char">>>) attributes {specifiers = ["static"]}
// CHECK-NEXT:    %[[I:.*]] = literal "3" : i64
// CHECK-NEXT:    %[[E:.*]] = subscript %[[IO]][%[[I]]]
// CHECK-NEXT:    %[[P:.*]] = load %[[E]]
// CHECK-NEXT:    call_opaque "k2"(%[[P]])
// CHECK-LABEL: emitc.func @fragment(
// CHECK-NEXT:    call @fragment_part0(
// CHECK-NEXT:    call @fragment_part1(
// CHECK-NEXT:    return
emitc.func @fragment(%a: !p, %b: !p, %c: !cp, %io: !emitc.ptr<!p>) {
  %0 = literal "3" : i64
  %1 = subscript %io[%0] : (!emitc.ptr<!p>, i64) -> !emitc.lvalue<!p>
  %2 = load %1 : <!p>
  call_opaque "k0"(%2) : (!p) -> ()
  call_opaque "k1"(%2) : (!p) -> ()
  call_opaque "k2"(%2) : (!p) -> ()
  return
}

// A value that is not pointer arithmetic (what a call returned) cannot be
// computed again: the function stays whole.
// CHECK-NOT: @kept_part
// CHECK-LABEL: emitc.func @kept(
// CHECK-NEXT:    call_opaque "make"
// CHECK-COUNT-3: call_opaque "k
// CHECK-NEXT:    return
emitc.func @kept(%a: !p) {
  %v = call_opaque "make"() : () -> !p
  call_opaque "k0"(%a) : (!p) -> ()
  call_opaque "k1"(%v) : (!p) -> ()
  call_opaque "k2"(%a) : (!p) -> ()
  return
}

// Two calls fit one part: left as it is.
// CHECK-NOT: @short_part
// CHECK-LABEL: emitc.func @short(
// CHECK-NEXT:    call_opaque "k0"
// CHECK-NEXT:    call_opaque "k1"
// CHECK-NEXT:    return
emitc.func @short(%a: !p) {
  call_opaque "k0"(%a) : (!p) -> ()
  call_opaque "k1"(%a) : (!p) -> ()
  return
}
